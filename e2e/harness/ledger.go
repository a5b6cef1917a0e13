package harness

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the database/sql driver, for reading herald's ledger
)

// Row is one obligation as the ledger holds it.
type Row struct {
	ID, MessageID           int64
	Part, Parts             int
	DeliveryKey             string
	Platform, ChatID, Text  string
	State                   string
	Attempts                int
	FencingToken            int64
	Owner                   string
	Ambiguous               int
	ErrorClass, Error, PMID string
}

// Terminal reports whether the row's state is final.
func (r Row) Terminal() bool { return r.State == "delivered" || r.State == "abandoned" }

// Attempt is one row of the ledger's attempt history.
type Attempt struct {
	ObligationID int64
	Attempt      int
	FencingToken int64
	Owner        string
	Outcome      string
}

// Ledger reads herald's database in a data directory, read-only.
type Ledger struct{ db *sql.DB }

// OpenLedger opens home's database for reading.
func OpenLedger(home string) (*Ledger, error) {
	path := filepath.Join(home, "herald.db")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	return &Ledger{db: db}, nil
}

// Close closes the reader.
func (l *Ledger) Close() error { return l.db.Close() }

// Rows returns every obligation, by id.
func (l *Ledger) Rows(ctx context.Context) ([]Row, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT o.id, o.message_id, o.part, m.parts, o.delivery_key, o.platform,
		o.chat_id, o.text, o.state, o.attempts, o.fencing_token, coalesce(o.owner, ''), o.ambiguous,
		coalesce(o.error_class, ''), coalesce(o.error, ''), coalesce(o.platform_message_id, '')
		FROM obligations o JOIN messages m ON m.id = o.message_id ORDER BY o.id`)
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.MessageID, &r.Part, &r.Parts, &r.DeliveryKey, &r.Platform, &r.ChatID, &r.Text,
			&r.State, &r.Attempts, &r.FencingToken, &r.Owner, &r.Ambiguous, &r.ErrorClass, &r.Error, &r.PMID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Attempts returns the attempt history, by obligation and attempt.
func (l *Ledger) Attempts(ctx context.Context) ([]Attempt, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT obligation_id, attempt, fencing_token, owner, outcome FROM attempts ORDER BY obligation_id, id`)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.ObligationID, &a.Attempt, &a.FencingToken, &a.Owner, &a.Outcome); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Open counts obligations not yet terminal, and all obligations.
func (l *Ledger) Open(ctx context.Context) (open, total int, err error) {
	err = l.db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state NOT IN ('delivered', 'abandoned')), count(*) FROM obligations`).Scan(&open, &total)
	return open, total, err
}

// IntegrityCheck runs PRAGMA integrity_check.
func (l *Ledger) IntegrityCheck(ctx context.Context) error {
	rows, err := l.db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		found = append(found, s)
	}
	if len(found) == 1 && found[0] == "ok" {
		return nil
	}
	return fmt.Errorf("integrity_check: %s", strings.Join(found, "; "))
}
