// Package gateway is the herald process: configuration, the HTTP API, the
// delivery worker, boot recovery and graceful shutdown, wired around the
// outbox ledger and the platform adapters.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"herald/cron"
	"herald/internal/clock"
	"herald/internal/faultpoint"
	"herald/internal/owner"
	"herald/internal/split"
	"herald/internal/store"
	"herald/outbox"
)

// Platforms is the set of configured platforms.
type Platforms interface {
	// Lookup returns the adapter for a platform name.
	Lookup(name string) (outbox.Sender, bool)
	// Names returns the configured names, sorted.
	Names() []string
}

// Deps are what a Gateway is built from besides its Config.
type Deps struct {
	Clock     clock.Clock
	Faults    *faultpoint.Set
	Log       *slog.Logger
	Platforms Platforms
	// Stdout receives the ready line (default os.Stdout).
	Stdout io.Writer
}

// Gateway is one running herald process.
type Gateway struct {
	cfg       Config
	clk       clock.Clock
	log       *slog.Logger
	stdout    io.Writer
	platforms Platforms

	owner  *owner.Owner
	db     *store.DB
	ledger *outbox.Ledger
	worker *outbox.Worker
	sched  *cron.Scheduler

	ready atomic.Bool
}

// Open acquires the owner lock, opens (and migrates) the database and builds
// the ledger and worker. Nothing is claimed or served until Run.
func Open(ctx context.Context, cfg Config, d Deps) (*Gateway, error) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Stdout == nil {
		d.Stdout = os.Stdout
	}
	if err := os.MkdirAll(cfg.Home, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", cfg.Home, err)
	}
	own, err := owner.Acquire(cfg.Home)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, store.Options{Path: filepath.Join(cfg.Home, store.FileName), Synchronous: cfg.Synchronous}, d.Clock)
	if err != nil {
		own.Release()
		return nil, err
	}
	ledger, err := outbox.New(db, d.Faults, owner.NewLiveness(cfg.Home, own.ID()), d.Log, cfg.OutboxConfig(own.ID()))
	if err != nil {
		db.Close()
		own.Release()
		return nil, err
	}
	g := &Gateway{
		cfg: cfg, clk: d.Clock, log: d.Log, stdout: d.Stdout, platforms: d.Platforms,
		owner: own, db: db, ledger: ledger,
	}
	g.worker = outbox.NewWorker(ledger, d.Platforms.Lookup, outbox.WorkerConfig{
		Concurrency:  cfg.Concurrency,
		PollInterval: time.Duration(cfg.PollInterval),
	})
	scfg, err := cfg.SchedulerConfig(own.ID())
	if err != nil {
		g.Close()
		return nil, err
	}
	scfg.KnownPlatform = func(p string) bool { _, ok := d.Platforms.Lookup(p); return ok }
	scfg.Limit = func(p string) split.Limit {
		if s, ok := d.Platforms.Lookup(p); ok {
			return s.Limit()
		}
		return split.Limit{}
	}
	scfg.Delivered = g.worker.Notify
	g.sched, err = cron.New(db, d.Faults, owner.NewLiveness(cfg.Home, own.ID()), d.Log, scfg)
	if err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Scheduler returns the gateway's scheduler.
func (g *Gateway) Scheduler() *cron.Scheduler { return g.sched }

// Ledger returns the gateway's delivery ledger.
func (g *Gateway) Ledger() *outbox.Ledger { return g.ledger }

// OwnerID returns this process's owner id.
func (g *Gateway) OwnerID() string { return g.owner.ID() }

// Close releases the database and the owner lock.
func (g *Gateway) Close() error {
	return errors.Join(g.db.Close(), g.owner.Release())
}

// Run recovers what earlier processes left (the boot sweep), then serves the
// API and delivers until ctx is cancelled (SIGTERM). It then drains: the
// listener closes, no new claims are made, and deliveries in flight get up to
// DrainTimeout to settle before they are cut off (a cut-off send is settled
// as ambiguous, so its next copy is marked). Run returns nil after a clean
// drain.
func (g *Gateway) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", g.cfg.Addr, err)
	}
	g.log.Info("boot sweep starting", "owner", g.owner.ID())
	rep, err := g.ledger.BootSweep(ctx, g.platforms.Lookup, g.cfg.Concurrency)
	if err != nil {
		ln.Close()
		return err
	}
	g.log.Info("boot sweep done", "claimed", rep.Claimed, "delivered", rep.Delivered, "failed", rep.Failed,
		"abandoned", rep.Abandoned, "unsettled", rep.Unsettled)
	interrupted, err := g.sched.Recover(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	g.log.Info("scheduler recovery done", "interrupted", interrupted)

	// Deliveries and executions in flight run under their own context: a
	// drain lets them finish, and only the drain timeout cuts them off.
	deliverCtx, cutOff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutOff()
	workerDone := make(chan error, 1)
	go func() { workerDone <- g.worker.Run(ctx, deliverCtx) }()
	schedDone := g.sched.Start(ctx, deliverCtx)

	srv := &http.Server{
		Handler:           requestLog(g.log, g.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	g.ready.Store(true)
	fmt.Fprintf(g.stdout, "herald: serving on http://%s (home %s, owner %s)\n", ln.Addr(), g.cfg.Home, g.owner.ID())

	select {
	case <-ctx.Done():
	case err := <-serveDone:
		g.ready.Store(false)
		cutOff()
		<-workerDone
		<-schedDone
		return fmt.Errorf("serve: %w", err)
	}

	g.ready.Store(false)
	g.log.Info("draining", "timeout", time.Duration(g.cfg.DrainTimeout).String())
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(g.cfg.DrainTimeout))
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		g.log.Warn("http shutdown cut short", "err", err)
	}
	// Executions finish first: a finished run records a delivery the worker
	// may still send while the drain lasts.
	cut := false
	for _, done := range []<-chan error{schedDone, workerDone} {
		select {
		case <-done:
		case <-drainCtx.Done():
			g.log.Warn("drain timeout: cutting off work in flight; the next process to boot recovers it (a cut-off send is redelivered marked)")
			cutOff()
			<-done
			cut = true
		}
	}
	if cut {
		g.log.Warn("stopped with work cut off at the drain timeout")
	} else {
		g.log.Info("drained")
	}
	return nil
}
