// Package store opens herald's one SQLite file and runs transactions on it.
//
// Writers begin IMMEDIATE, so a transaction that reads and then writes never
// fails half-way with "database is locked" under contention from other
// processes (a deferred transaction upgrading its lock cannot wait on the busy
// handler). Every transaction reads the clock once, at BEGIN, and exposes that
// instant as Tx.Now, so all rows a transaction writes agree on "now"
// (SPEC §3; wtf's Tx.now). Instants are stored as fixed-width UTC text
// (TimeFormat), which sorts in time order.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"herald/internal/clock"
)

// Defaults for Options.
const (
	DefaultSynchronous = "FULL"
	DefaultBusyTimeout = 10 * time.Second
	DefaultReaders     = 4
	// FileName is the database file's name inside HERALD_HOME.
	FileName = "herald.db"
)

// TimeFormat is the one format instants are stored in: UTC, nanoseconds,
// fixed width, so that text order is time order.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// Sentinel errors callers branch on.
var (
	// ErrBusy: the database stayed locked by another writer past the busy
	// timeout. Retrying later may succeed.
	ErrBusy = errors.New("database is busy")
	// ErrFull: the disk or the database is full (SQLITE_FULL).
	ErrFull = errors.New("database or disk is full")
	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("not found")
)

// Options configure Open.
type Options struct {
	// Path of the database file. Its directory is created if missing.
	Path string
	// Synchronous is PRAGMA synchronous: OFF, NORMAL, FULL (default) or EXTRA.
	Synchronous string
	// BusyTimeout is how long a writer waits for another process's lock
	// before failing with ErrBusy (default 10 s).
	BusyTimeout time.Duration
	// Readers is the read connection pool size (default 4).
	Readers int
}

// DB is an open herald database: one writer connection (writes from one
// process are serialised here rather than on SQLite's busy handler) and a
// pool of query-only readers.
type DB struct {
	path  string
	write *sql.DB
	read  *sql.DB
	clk   clock.Clock
}

// Open opens (creating if needed) the database at opts.Path, sets WAL mode,
// the synchronous level and the busy timeout, and applies every embedded
// migration not yet applied. Several processes may open one file at once.
func Open(ctx context.Context, opts Options, clk clock.Clock) (*DB, error) {
	if opts.Path == "" {
		return nil, errors.New("open store: empty path")
	}
	if opts.Synchronous == "" {
		opts.Synchronous = DefaultSynchronous
	}
	switch strings.ToUpper(opts.Synchronous) {
	case "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return nil, fmt.Errorf("open store: synchronous %q is not one of OFF, NORMAL, FULL, EXTRA", opts.Synchronous)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.Readers <= 0 {
		opts.Readers = DefaultReaders
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o755); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	base := "file:" + (&url.URL{Path: opts.Path}).EscapedPath()
	common := url.Values{}
	common.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	common.Set("_journal_mode", "WAL")
	common.Set("_synchronous", strings.ToUpper(opts.Synchronous))
	common.Set("_foreign_keys", "1")

	wq := cloneValues(common)
	wq.Set("_txlock", "immediate")
	write, err := sql.Open("sqlite", base+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", opts.Path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxIdleTime(0)

	rq := cloneValues(common)
	rq.Set("_txlock", "deferred")
	rq.Set("_query_only", "1")
	read, err := sql.Open("sqlite", base+"?"+rq.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open store %s: %w", opts.Path, err)
	}
	read.SetMaxOpenConns(opts.Readers)
	read.SetMaxIdleConns(opts.Readers)

	db := &DB{path: opts.Path, write: write, read: read, clk: clk}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Clock returns the clock transactions read Now from.
func (db *DB) Clock() clock.Clock { return db.clk }

// Close closes both pools.
func (db *DB) Close() error {
	return errors.Join(db.write.Close(), db.read.Close())
}

// Tx is one transaction with its instant fixed at BEGIN.
type Tx struct {
	*sql.Tx
	// Now is the clock's reading taken once, right after BEGIN, in UTC.
	Now time.Time
}

// Write runs fn in a BEGIN IMMEDIATE transaction and commits it when fn
// returns nil; any error (or panic) rolls it back. Errors are classified:
// ErrBusy and ErrFull wrap the SQLite error.
func (db *DB) Write(ctx context.Context, fn func(tx *Tx) error) error {
	return db.run(ctx, db.write, fn)
}

// Read runs fn in a read-only deferred transaction: one consistent snapshot.
func (db *DB) Read(ctx context.Context, fn func(tx *Tx) error) error {
	return db.run(ctx, db.read, fn)
}

func (db *DB) run(ctx context.Context, pool *sql.DB, fn func(tx *Tx) error) (err error) {
	stx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return Classify(withCtx(ctx, fmt.Errorf("begin: %w", err)))
	}
	tx := &Tx{Tx: stx, Now: db.clk.Now().UTC()}
	defer func() {
		if p := recover(); p != nil {
			_ = stx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = stx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return Classify(withCtx(ctx, err))
	}
	if err := stx.Commit(); err != nil {
		return Classify(withCtx(ctx, fmt.Errorf("commit: %w", err)))
	}
	return nil
}

// withCtx adds ctx's error to err when ctx ended, so a transaction that
// database/sql rolled back because its context was cancelled reads as
// context.Canceled (callers stay quiet on a shutdown), not as a failure.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// Exec runs one statement outside a caller-visible transaction on the writer
// (for pragmas and maintenance such as VACUUM or a WAL checkpoint).
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := db.write.ExecContext(ctx, query, args...)
	return res, Classify(err)
}

// QueryRow runs a read-only single-row query on a reader.
func (db *DB) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return db.read.QueryRowContext(ctx, query, args...)
}

// Classify wraps err with ErrBusy or ErrFull when SQLite reported a lock
// timeout or a full disk, so callers can branch with errors.Is. Other errors
// (and nil) pass through unchanged.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrBusy) || errors.Is(err, ErrFull) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %w", ErrBusy, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("%w: %w", ErrFull, err)
		}
	}
	return err
}

// FormatTime renders t in TimeFormat (UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTime reads an instant stored in TimeFormat (or any RFC 3339 text).
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse stored instant %q: %w", s, err)
	}
	return t.UTC(), nil
}

// NullTime renders t in TimeFormat, or NULL for the zero instant.
func NullTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return sql.NullString{String: FormatTime(t), Valid: true}
}

// ParseNullTime reads a nullable stored instant; NULL gives the zero time.
func ParseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid || s.String == "" {
		return time.Time{}, nil
	}
	return ParseTime(s.String)
}

// IntegrityCheck runs PRAGMA integrity_check and returns nil when SQLite
// answers "ok", else an error listing what it found.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	rows, err := db.read.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(found) == 1 && found[0] == "ok" {
		return nil
	}
	return fmt.Errorf("integrity check: %s", strings.Join(found, "; "))
}
