package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"herald/internal/clock"
)

// Senders maps a platform name to its Sender; ok is false for a platform
// this process has not configured (its rows are left for a process that has).
type Senders func(platform string) (Sender, bool)

// WorkerConfig tunes a Worker. Zero fields take the Default… values.
type WorkerConfig struct {
	// Concurrency is the most deliveries in flight at once (each to a
	// different chat).
	Concurrency int
	// PollInterval is how often, in real time, an idle worker looks for work
	// that other processes recorded or orphaned.
	PollInterval time.Duration
	// MaintainInterval is how often (process clock) the worker applies the
	// age limit and prunes old terminal rows.
	MaintainInterval time.Duration
}

// Worker claims due obligations and delivers them, at most one per chat at a
// time, until stopped.
type Worker struct {
	l       *Ledger
	senders Senders
	cfg     WorkerConfig
	log     *slog.Logger

	wake     chan struct{}
	slots    chan struct{}
	inflight sync.WaitGroup
	lastMnt  time.Time
}

// NewWorker returns a worker delivering l's obligations through senders.
func NewWorker(l *Ledger, senders Senders, cfg WorkerConfig) *Worker {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaintainInterval <= 0 {
		cfg.MaintainInterval = time.Minute
	}
	return &Worker{
		l: l, senders: senders, cfg: cfg, log: l.log,
		wake:  make(chan struct{}, 1),
		slots: make(chan struct{}, cfg.Concurrency),
	}
}

// Notify tells the worker to look for work now (a message was recorded, or
// a delivery settled and its chat's next obligation became the head).
func (w *Worker) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) known(p string) bool { _, ok := w.senders(p); return ok }

// RunOnce claims as many obligations as there are free delivery slots and
// starts delivering them; it returns how many it claimed. The deliveries run
// on after it returns, under ctx; Wait waits for them.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	free := cap(w.slots) - len(w.slots)
	claims, err := w.l.Claim(ctx, free, w.known)
	if err != nil {
		return 0, err
	}
	for _, c := range claims {
		w.start(ctx, c)
	}
	return len(claims), nil
}

func (w *Worker) start(ctx context.Context, c Claim) {
	s, _ := w.senders(c.Platform)
	w.slots <- struct{}{}
	w.inflight.Add(1)
	go func() {
		defer w.inflight.Done()
		defer func() { <-w.slots; w.Notify() }()
		oc, err := w.l.Deliver(ctx, c, s)
		w.report(c, oc, err)
	}()
}

func (w *Worker) report(c Claim, oc Outcome, err error) {
	attrs := []any{"obligation", c.ID, "platform", c.Platform, "chat", c.ChatID, "attempt", c.Attempts, "fence", c.FencingToken}
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, ErrStaleFence):
		w.log.Warn("delivery result discarded: another owner took the row", append(attrs, "err", err)...)
	case err != nil:
		w.log.Error("delivery not settled", append(attrs, "err", err)...)
	case oc.State == StateDelivered:
		w.log.Debug("delivered", attrs...)
	case oc.State == StateAbandoned:
		w.log.Error("delivery abandoned", append(attrs, "err", oc.Err)...)
	default:
		w.log.Warn("delivery failed; will retry", append(attrs, "err", oc.Err)...)
	}
}

// Wait blocks until every delivery started by RunOnce has finished.
func (w *Worker) Wait() { w.inflight.Wait() }

// Run delivers until ctx is done, then waits for deliveries in flight to
// settle (they run under deliverCtx, which the caller cancels to cut a drain
// short). It returns nil on a clean stop.
func (w *Worker) Run(ctx, deliverCtx context.Context) error {
	clk := w.l.clk
	defer w.Wait()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if _, err := w.RunOnce(deliverCtx); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			w.log.Error("claim obligations", "err", err)
		}
		w.maintain(ctx)
		at, _, err := w.l.NextWake(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("next wake", "err", err)
		}
		clock.Idle(ctx, clk, w.wake, at, w.cfg.PollInterval)
	}
}

// maintain applies the age limit and retention at most once per
// MaintainInterval of the process clock.
func (w *Worker) maintain(ctx context.Context) {
	now := w.l.clk.Now()
	// Skip while the interval has not passed — unless the clock stepped
	// back, which restarts the interval.
	if !w.lastMnt.IsZero() && !now.Before(w.lastMnt) && now.Sub(w.lastMnt) < w.cfg.MaintainInterval {
		return
	}
	w.lastMnt = now
	if n, err := w.l.AbandonExpired(ctx); err != nil {
		if ctx.Err() == nil {
			w.log.Error("apply age limit", "err", err)
		}
	} else if n > 0 {
		w.log.Warn("abandoned obligations past the age limit", "count", n)
	}
	if n, err := w.l.Prune(ctx); err != nil {
		if ctx.Err() == nil {
			w.log.Error("prune terminal rows", "err", err)
		}
	} else if n > 0 {
		w.log.Info("pruned terminal messages", "count", n)
	}
}
