package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered schema change, embedded in the binary.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in version order. File names
// are NNNN_name.sql; versions start at 1 and have no holes.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: want NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %04d_%s: want version %d (no holes)", m.Version, m.Name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion returns PRAGMA user_version: the last migration applied.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := db.write.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// migrate applies each migration newer than user_version in its own
// IMMEDIATE transaction, bumping user_version in that transaction, so
// processes opening one file at once apply each migration exactly once.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		err := db.Write(ctx, func(tx *Tx) error {
			var v int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
				return err
			}
			if v >= m.Version {
				return nil
			}
			if v != m.Version-1 {
				return fmt.Errorf("schema at version %d, cannot apply %d", v, m.Version)
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version))
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %04d_%s to %s: %w", m.Version, m.Name, db.path, err)
		}
	}
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if v > len(ms) {
		return fmt.Errorf("open store %s: schema version %d is newer than this binary knows (%d); upgrade herald", db.path, v, len(ms))
	}
	return nil
}
