// Package outbox is herald's delivery ledger: every message is recorded as
// obligations before anything is sent, and each send follows the protocol of
// SPEC §4 — record, claim (a CAS that bumps the fencing token and stamps owner
// and lease), send, settle (a CAS on the fencing token) — so that a crash at
// any point leaves a row that some process will finish, and no copy that might
// repeat an earlier one goes out unmarked.
package outbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"herald/internal/clock"
	"herald/internal/faultpoint"
	"herald/internal/split"
	"herald/internal/store"
)

// Defaults for Config.
const (
	DefaultLease        = 60 * time.Second
	DefaultSendTimeout  = 20 * time.Second
	DefaultMaxAttempts  = 20
	DefaultMaxAge       = 24 * time.Hour
	DefaultBackoffBase  = time.Second
	DefaultBackoffMax   = 5 * time.Minute
	DefaultRetention    = 7 * 24 * time.Hour
	DefaultConcurrency  = 16
	DefaultPollInterval = 500 * time.Millisecond
	// MaxKeyLength bounds a caller's idempotency key, platform name and chat
	// id, in bytes.
	MaxKeyLength = 256
)

// Config tunes a Ledger. Zero fields take the Default… values.
type Config struct {
	// Owner is this process's owner id (internal/owner); required.
	Owner string
	// Lease is how long a claim holds a row before another process may take
	// it without proof that the owner died.
	Lease time.Duration
	// SendTimeout bounds one send; it must be under half the lease so a send
	// always settles (or gives up) while its claim is still ours.
	SendTimeout time.Duration
	// MaxAttempts is the attempt budget per obligation; the attempt that
	// exhausts it abandons the row.
	MaxAttempts int
	// MaxAge abandons an obligation not delivered this long after it was
	// recorded.
	MaxAge time.Duration
	// BackoffBase and BackoffMax shape the retry delay: base·2^(attempts-1),
	// capped at max, with equal jitter (half fixed, half random).
	BackoffBase, BackoffMax time.Duration
	// Retention keeps terminal rows this long before Prune deletes them; a
	// negative value keeps them forever.
	Retention time.Duration
	// Seed seeds the jitter, so a test run can be replayed.
	Seed uint64
}

// Validate reports whether c (with defaults filled in) is usable: an owner,
// and a send timeout under half the lease.
func (c Config) Validate() error { return c.fill() }

func (c *Config) fill() error {
	if c.Owner == "" {
		return errors.New("outbox config: owner is required")
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = DefaultSendTimeout
		if c.SendTimeout > c.Lease/3 {
			c.SendTimeout = c.Lease / 3
		}
	}
	if c.SendTimeout*2 > c.Lease {
		return fmt.Errorf("outbox config: send timeout %s must be under half the lease %s", c.SendTimeout, c.Lease)
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	return nil
}

// Liveness answers whether an owner is still alive (internal/owner).
type Liveness interface {
	Alive(owner string) bool
}

// Ledger is the delivery ledger on one store.
type Ledger struct {
	db     *store.DB
	clk    clock.Clock
	faults *faultpoint.Set
	live   Liveness
	log    *slog.Logger
	cfg    Config

	rmu sync.Mutex
	rnd *mrand.Rand
}

// New returns a Ledger. faults may be nil (nothing armed); log may be nil.
func New(db *store.DB, faults *faultpoint.Set, live Liveness, log *slog.Logger, cfg Config) (*Ledger, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ledger{
		db: db, clk: db.Clock(), faults: faults, live: live, log: log, cfg: cfg,
		rnd: mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}, nil
}

// Config returns the ledger's configuration with defaults filled in.
func (l *Ledger) Config() Config { return l.cfg }

// DB returns the store the ledger writes to.
func (l *Ledger) DB() *store.DB { return l.db }

// NewMessage is what a caller hands in.
type NewMessage struct {
	Platform string
	ChatID   string
	Text     string
	// IdempotencyKey: the same key never creates a second message. Empty
	// derives a fresh random key (every call then records a new message).
	IdempotencyKey string
}

// Message is a recorded message: the caller's view of its obligations.
type Message struct {
	ID             int64  `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Platform       string `json:"platform"`
	ChatID         string `json:"chat_id"`
	// State is the message's state folded over its parts: delivered when
	// every part is, abandoned when any part is, else the least advanced
	// part's (attempting, failed, pending).
	State State `json:"state"`
	// Attempts is the sum of the parts' attempts.
	Attempts int `json:"attempts"`
	// PlatformMessageID is the first part's platform message id.
	PlatformMessageID string `json:"platform_message_id"`
	// Error is the first part's error that has one.
	Error     string       `json:"error"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
	Parts     []Obligation `json:"parts"`
}

// Obligation is one ledger row: one part of a message owed to one chat.
type Obligation struct {
	ID        int64 `json:"id"`
	MessageID int64 `json:"message_id"`
	// Part is this obligation's 0-based place in its message of Parts.
	Part              int        `json:"part"`
	Parts             int        `json:"parts"`
	DeliveryKey       string     `json:"delivery_key"`
	Platform          string     `json:"platform"`
	ChatID            string     `json:"chat_id"`
	Text              string     `json:"text"`
	State             State      `json:"state"`
	Attempts          int        `json:"attempts"`
	FencingToken      int64      `json:"fencing_token"`
	Owner             string     `json:"owner"`
	LeaseUntil        time.Time  `json:"lease_until"`
	NextAttemptAt     time.Time  `json:"next_attempt_at"`
	Ambiguous         int        `json:"ambiguous"`
	ErrorClass        ErrorClass `json:"error_class"`
	Error             string     `json:"error"`
	PlatformMessageID string     `json:"platform_message_id"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
}

// PayloadHash is the hash that decides whether a reused idempotency key
// carries the same message: SHA-256 of platform, chat and text.
func PayloadHash(platform, chatID, text string) string {
	h := sha256.New()
	for _, s := range []string{platform, chatID, text} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

var deliveryKeyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// DeliveryKey derives the idempotency key a platform sees for one part of a
// message: "h" + 23 base32 characters of SHA-256(key, part) — 24 characters,
// within Discord's 25-character nonce limit (PLATFORMS.md).
func DeliveryKey(idempotencyKey string, part int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", idempotencyKey, part)))
	return "h" + deliveryKeyEncoding.EncodeToString(sum[:])[:23]
}

func randomKey() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("random idempotency key: %v", err))
	}
	return "auto-" + hex.EncodeToString(b[:])
}

func (m *NewMessage) validate() error {
	switch {
	case strings.TrimSpace(m.Platform) == "":
		return fmt.Errorf("%w: platform is empty", ErrInvalid)
	case strings.TrimSpace(m.ChatID) == "":
		return fmt.Errorf("%w: chat_id is empty", ErrInvalid)
	case strings.TrimSpace(m.Text) == "":
		return fmt.Errorf("%w: text is empty", ErrInvalid)
	case len(m.ChatID) > MaxKeyLength:
		return fmt.Errorf("%w: chat_id is longer than %d bytes", ErrInvalid, MaxKeyLength)
	case len(m.IdempotencyKey) > MaxKeyLength:
		return fmt.Errorf("%w: idempotency_key is longer than %d bytes", ErrInvalid, MaxKeyLength)
	case !utf8.ValidString(m.Text) || !utf8.ValidString(m.ChatID) || !utf8.ValidString(m.IdempotencyKey):
		return fmt.Errorf("%w: text, chat_id and idempotency_key must be valid UTF-8", ErrInvalid)
	}
	return nil
}

// Parts splits text into the parts one message becomes under limit, leaving
// room in every part for Marker.
func Parts(text string, limit split.Limit) ([]string, error) {
	if limit.Max <= 0 {
		return []string{text}, nil
	}
	room := limit
	room.Max -= split.Length(Marker, limit.Unit)
	parts, err := split.Text(text, room)
	if err != nil {
		return nil, fmt.Errorf("%w: split text: %w", ErrInvalid, err)
	}
	return parts, nil
}

// Record writes m as a message of one or more obligations (split under
// limit) in their own transaction, and returns it. A reused idempotency key
// returns the existing message with created=false, or ErrConflict when the
// payload differs. Errors: ErrInvalid, ErrConflict, store.ErrBusy,
// store.ErrFull.
func (l *Ledger) Record(ctx context.Context, m NewMessage, limit split.Limit) (Message, bool, error) {
	var id int64
	var created bool
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		id, created, err = RecordTx(ctx, tx, m, limit)
		return err
	})
	if err != nil {
		return Message{}, false, err
	}
	if created {
		if err := l.faults.Hit(ctx, faultpoint.OutboxRecorded); err != nil {
			return Message{}, false, err
		}
	}
	msg, err := l.Get(ctx, id)
	return msg, created, err
}

// RecordTx is Record inside a caller's transaction (the transactional
// outbox: cron enqueues a job's output in the transaction that finishes its
// execution). It returns the message id and whether it was created.
func RecordTx(ctx context.Context, tx *store.Tx, m NewMessage, limit split.Limit) (int64, bool, error) {
	if err := m.validate(); err != nil {
		return 0, false, err
	}
	if m.IdempotencyKey == "" {
		m.IdempotencyKey = randomKey()
	}
	hash := PayloadHash(m.Platform, m.ChatID, m.Text)
	var id int64
	var have string
	err := tx.QueryRowContext(ctx, `SELECT id, payload_sha256 FROM messages WHERE idempotency_key = ?`, m.IdempotencyKey).Scan(&id, &have)
	switch {
	case err == nil:
		if have != hash {
			return 0, false, fmt.Errorf("%w: key %q was recorded with a different platform, chat or text (message %d)", ErrConflict, m.IdempotencyKey, id)
		}
		return id, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	parts, err := Parts(m.Text, limit)
	if err != nil {
		return 0, false, err
	}
	now := store.FormatTime(tx.Now)
	res, err := tx.ExecContext(ctx, `INSERT INTO messages (idempotency_key, payload_sha256, platform, chat_id, parts, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		m.IdempotencyKey, hash, m.Platform, m.ChatID, len(parts), now)
	if err != nil {
		return 0, false, fmt.Errorf("record message: %w", err)
	}
	if id, err = res.LastInsertId(); err != nil {
		return 0, false, fmt.Errorf("record message: %w", err)
	}
	for i, text := range parts {
		_, err := tx.ExecContext(ctx, `INSERT INTO obligations
			(message_id, part, delivery_key, platform, chat_id, text, state, next_attempt_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
			id, i, DeliveryKey(m.IdempotencyKey, i), m.Platform, m.ChatID, text, now, now, now)
		if err != nil {
			return 0, false, fmt.Errorf("record obligation %d/%d of message %d: %w", i+1, len(parts), id, err)
		}
	}
	return id, true, nil
}

const obligationColumns = `id, message_id, part, delivery_key, platform, chat_id, text, state, attempts,
	fencing_token, owner, lease_until, next_attempt_at, ambiguous, error_class, error,
	platform_message_id, created_at, updated_at,
	(SELECT m.parts FROM messages m WHERE m.id = obligations.message_id)`

type rowScanner interface{ Scan(dest ...any) error }

func scanObligation(r rowScanner) (Obligation, error) {
	var o Obligation
	var owner, lease, errClass, errText, pmid sql.NullString
	var next, created, updated string
	var state string
	err := r.Scan(&o.ID, &o.MessageID, &o.Part, &o.DeliveryKey, &o.Platform, &o.ChatID, &o.Text, &state,
		&o.Attempts, &o.FencingToken, &owner, &lease, &next, &o.Ambiguous, &errClass, &errText, &pmid,
		&created, &updated, &o.Parts)
	if err != nil {
		return o, err
	}
	o.State = State(state)
	o.Owner, o.ErrorClass, o.Error, o.PlatformMessageID = owner.String, ErrorClass(errClass.String), errText.String, pmid.String
	var perr [4]error
	o.LeaseUntil, perr[0] = store.ParseNullTime(lease)
	o.NextAttemptAt, perr[1] = store.ParseTime(next)
	o.CreatedAt, perr[2] = store.ParseTime(created)
	o.UpdatedAt, perr[3] = store.ParseTime(updated)
	return o, errors.Join(perr[:]...)
}

// Get returns message id with its parts. Errors: ErrNotFound.
func (l *Ledger) Get(ctx context.Context, id int64) (Message, error) {
	var msg Message
	err := l.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		msg, err = getTx(ctx, tx, id)
		return err
	})
	return msg, err
}

func getTx(ctx context.Context, tx *store.Tx, id int64) (Message, error) {
	m := Message{ID: id}
	var created string
	err := tx.QueryRowContext(ctx, `SELECT idempotency_key, platform, chat_id, created_at FROM messages WHERE id = ?`, id).
		Scan(&m.IdempotencyKey, &m.Platform, &m.ChatID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("get message %d: %w", id, err)
	}
	if m.CreatedAt, err = store.ParseTime(created); err != nil {
		return m, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+obligationColumns+` FROM obligations WHERE message_id = ? ORDER BY part`, id)
	if err != nil {
		return m, fmt.Errorf("get message %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		o, err := scanObligation(rows)
		if err != nil {
			return m, fmt.Errorf("get message %d: %w", id, err)
		}
		m.Parts = append(m.Parts, o)
	}
	if err := rows.Err(); err != nil {
		return m, fmt.Errorf("get message %d: %w", id, err)
	}
	m.fold()
	return m, nil
}

// fold derives the message's state and summary fields from its parts:
// abandoned if any part is, delivered if all are, else attempting, failed or
// pending, the first that any part is in.
func (m *Message) fold() {
	m.Attempts, m.UpdatedAt = 0, m.CreatedAt
	in := map[State]bool{}
	for i, p := range m.Parts {
		in[p.State] = true
		m.Attempts += p.Attempts
		if p.UpdatedAt.After(m.UpdatedAt) {
			m.UpdatedAt = p.UpdatedAt
		}
		if i == 0 {
			m.PlatformMessageID = p.PlatformMessageID
		}
		if m.Error == "" && p.Error != "" {
			m.Error = p.Error
		}
	}
	switch {
	case in[StateAbandoned]:
		m.State = StateAbandoned
	case len(in) == 1 && in[StateDelivered]:
		m.State = StateDelivered
	case in[StateAttempting]:
		m.State = StateAttempting
	case in[StateFailed]:
		m.State = StateFailed
	default:
		m.State = StatePending
	}
}

// Filter narrows List. Zero fields match everything.
type Filter struct {
	Platform string
	ChatID   string
	// Open lists only messages with a part not yet terminal.
	Open bool
	// BeforeID pages backwards: messages with id < BeforeID.
	BeforeID int64
	// Limit caps the result (default 100, at most 1000).
	Limit int
}

// List returns messages newest first.
func (l *Ledger) List(ctx context.Context, f Filter) ([]Message, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	q := `SELECT m.id FROM messages m WHERE 1=1`
	var args []any
	if f.Platform != "" {
		q += ` AND m.platform = ?`
		args = append(args, f.Platform)
	}
	if f.ChatID != "" {
		q += ` AND m.chat_id = ?`
		args = append(args, f.ChatID)
	}
	if f.BeforeID > 0 {
		q += ` AND m.id < ?`
		args = append(args, f.BeforeID)
	}
	if f.Open {
		q += ` AND EXISTS (SELECT 1 FROM obligations o WHERE o.message_id = m.id AND o.state IN ('pending', 'attempting', 'failed'))`
	}
	q += ` ORDER BY m.id DESC LIMIT ?`
	args = append(args, f.Limit)
	var out []Message
	err := l.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			m, err := getTx(ctx, tx, id)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return out, nil
}

// Counts returns how many obligations are in each state.
func (l *Ledger) Counts(ctx context.Context) (map[State]int, error) {
	out := map[State]int{}
	err := l.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT state, count(*) FROM obligations GROUP BY state`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				return err
			}
			out[State(s)] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("count obligations: %w", err)
	}
	return out, nil
}

func (l *Ledger) jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	return d/2 + time.Duration(l.rnd.Int64N(int64(d/2)+1))
}

// Backoff returns the retry delay after the given number of attempts,
// without jitter: base·2^(attempts-1), capped at BackoffMax.
func (l *Ledger) Backoff(attempts int) time.Duration {
	d := l.cfg.BackoffBase
	for i := 1; i < attempts && d < l.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > l.cfg.BackoffMax {
		d = l.cfg.BackoffMax
	}
	return d
}

// AttemptRecord is one finished (or lost) attempt of an obligation: the
// history behind its state.
type AttemptRecord struct {
	ObligationID int64      `json:"obligation_id"`
	Attempt      int        `json:"attempt"`
	FencingToken int64      `json:"fencing_token"`
	Owner        string     `json:"owner"`
	Outcome      string     `json:"outcome"`
	ErrorClass   ErrorClass `json:"error_class,omitempty"`
	Error        string     `json:"error,omitempty"`
	Redelivery   bool       `json:"redelivery"`
	At           time.Time  `json:"at"`
}

// History returns the attempts of every part of message id, in order.
func (l *Ledger) History(ctx context.Context, id int64) ([]AttemptRecord, error) {
	var out []AttemptRecord
	err := l.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT a.obligation_id, a.attempt, a.fencing_token, a.owner, a.outcome,
			coalesce(a.error_class, ''), coalesce(a.error, ''), a.redelivery, a.at
			FROM attempts a JOIN obligations o ON o.id = a.obligation_id
			WHERE o.message_id = ? ORDER BY a.id`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a AttemptRecord
			var class, at string
			if err := rows.Scan(&a.ObligationID, &a.Attempt, &a.FencingToken, &a.Owner, &a.Outcome, &class, &a.Error, &a.Redelivery, &at); err != nil {
				return err
			}
			a.ErrorClass = ErrorClass(class)
			if a.At, err = store.ParseTime(at); err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("attempt history of message %d: %w", id, err)
	}
	return out, nil
}
