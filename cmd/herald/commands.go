package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"herald/gateway"
	"herald/internal/clock"
	"herald/internal/faultpoint"
	"herald/internal/owner"
	"herald/internal/store"
	"herald/outbox"
)

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// faultsCmd: `herald faults list` prints every fault point and its window.
func faultsCmd(args []string, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "list" {
		return fmt.Errorf("%w: want `herald faults list`", errUsage)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, p := range faultpoint.Catalog() {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Window)
	}
	return tw.Flush()
}

// clockCmd: `herald clock set --file PATH INSTANT` and
// `herald clock advance --file PATH DURATION` write the virtual clock file.
func clockCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "advance" && args[0] != "show") {
		return fmt.Errorf("%w: want `herald clock set|advance|show --file PATH ...`", errUsage)
	}
	verb := args[0]
	fs := quietFlags("clock "+verb, "clock set --file PATH INSTANT | advance --file PATH DURATION | show --file PATH", stdout)
	file := fs.String("file", os.Getenv(clock.EnvFile), "clock file (default $HERALD_CLOCK_FILE)")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("%w: --file is required", errUsage)
	}
	var t time.Time
	switch verb {
	case "show":
		cur, err := clock.ReadFile(*file)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, cur.Format(time.RFC3339Nano))
		return nil
	case "set":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: want `herald clock set --file PATH INSTANT` (RFC 3339)", errUsage)
		}
		v, err := time.Parse(time.RFC3339Nano, fs.Arg(0))
		if err != nil {
			return fmt.Errorf("%w: instant %q is not RFC 3339: %w", errUsage, fs.Arg(0), err)
		}
		t = v
	case "advance":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: want `herald clock advance --file PATH DURATION`", errUsage)
		}
		d, err := time.ParseDuration(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("%w: duration %q: %w", errUsage, fs.Arg(0), err)
		}
		cur, err := clock.ReadFile(*file)
		if err != nil {
			return err
		}
		t = cur.Add(d)
	}
	if err := clock.WriteFile(*file, t); err != nil {
		return err
	}
	fmt.Fprintln(stdout, t.UTC().Format(time.RFC3339Nano))
	return nil
}

// send posts one message to a running herald over its API.
func send(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := quietFlags("send", "send [--platform NAME] --chat ID --text TEXT|- [--key K] [--wait D]", stdout)
	api := addrFlag(fs, getenv)
	plat := fs.String("platform", "console", "platform name")
	chat := fs.String("chat", "", "chat id (required)")
	text := fs.String("text", "", "message text (- reads standard input)")
	key := fs.String("key", "", "idempotency key")
	wait := fs.Duration("wait", 0, "wait up to this long for a terminal state")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *chat == "" || *text == "" {
		return fmt.Errorf("%w: --chat and --text are required", errUsage)
	}
	if *text == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		*text = string(b)
	}
	c := api()
	body := map[string]string{"platform": *plat, "chat_id": *chat, "text": *text, "idempotency_key": *key}
	var view map[string]any
	if err := c.call(ctx, http.MethodPost, "/v1/messages", body, &view); err != nil {
		return err
	}
	rc := clock.Real{}
	deadline := rc.Now().Add(*wait)
	for *wait > 0 {
		if s, _ := view["state"].(string); s == "delivered" || s == "abandoned" {
			break
		}
		if rc.Now().After(deadline) {
			break
		}
		if err := clock.Sleep(ctx, rc, 100*time.Millisecond); err != nil {
			return err
		}
		id := strconv.FormatFloat(view["id"].(float64), 'f', -1, 64)
		if err := c.call(ctx, http.MethodGet, "/v1/messages/"+id, nil, &view); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(view)
}

// openLedgerDB opens the database of a data directory for inspection.
func openLedgerDB(ctx context.Context, home string) (*store.DB, error) {
	path := filepath.Join(home, store.FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no herald database at %s: %w", path, err)
	}
	return store.Open(ctx, store.Options{Path: path}, clock.Real{})
}

// ledgerCmd inspects the delivery ledger of a data directory.
func ledgerCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want `herald ledger ls|show ID|stats`", errUsage)
	}
	verb := args[0]
	fs := quietFlags("ledger "+verb, "ledger ls [--open] [--limit N] | show ID | stats   [--home DIR] [--json]", stdout)
	home := fs.String("home", firstNonEmpty(getenv("HERALD_HOME"), gateway.DefaultHome), "data directory")
	asJSON := fs.Bool("json", false, "print JSON")
	open := fs.Bool("open", false, "ls: only messages not yet terminal")
	limit := fs.Int("limit", 50, "ls: how many")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	db, err := openLedgerDB(ctx, *home)
	if err != nil {
		return err
	}
	defer db.Close()
	l, err := outbox.New(db, nil, nil, nil, outbox.Config{Owner: "inspector"})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	switch verb {
	case "stats":
		counts, err := l.Counts(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return enc.Encode(counts)
		}
		for _, s := range outbox.AllStates() {
			fmt.Fprintf(stdout, "%-11s %d\n", s, counts[s])
		}
		return nil
	case "ls":
		ms, err := l.List(ctx, outbox.Filter{Open: *open, Limit: *limit})
		if err != nil {
			return err
		}
		if *asJSON {
			return enc.Encode(ms)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPLATFORM\tCHAT\tSTATE\tATTEMPTS\tPARTS\tERROR")
		for _, m := range ms {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\n", m.ID, m.Platform, m.ChatID, m.State, m.Attempts, len(m.Parts), m.Error)
		}
		return tw.Flush()
	case "show":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: want `herald ledger show ID`", errUsage)
		}
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: id %q is not an integer", errUsage, fs.Arg(0))
		}
		m, err := l.Get(ctx, id)
		if err != nil {
			return err
		}
		history, err := l.History(ctx, id)
		if err != nil {
			return err
		}
		return enc.Encode(struct {
			Message  outbox.Message         `json:"message"`
			Attempts []outbox.AttemptRecord `json:"attempts"`
		}{m, history})
	}
	return fmt.Errorf("%w: unknown ledger command %q (ls, show, stats)", errUsage, verb)
}

// doctor checks a data directory: schema, integrity, owners, open rows.
func doctor(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := quietFlags("doctor", "doctor [--home DIR]", stdout)
	home := fs.String("home", firstNonEmpty(getenv("HERALD_HOME"), gateway.DefaultHome), "data directory")
	if err := fs.parse(args); err != nil {
		return err
	}
	db, err := openLedgerDB(ctx, *home)
	if err != nil {
		return err
	}
	defer db.Close()
	var problems []string
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database     %s (schema version %d)\n", db.Path(), v)
	if err := db.IntegrityCheck(ctx); err != nil {
		problems = append(problems, err.Error())
		fmt.Fprintf(stdout, "integrity    FAILED: %v\n", err)
	} else {
		fmt.Fprintln(stdout, "integrity    ok")
	}
	locks, _ := filepath.Glob(filepath.Join(*home, owner.LockDir, "owner-*.lock"))
	live := owner.NewLiveness(*home, "")
	alive := 0
	for _, p := range locks {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "owner-"), ".lock")
		if live.Alive(id) {
			alive++
		}
	}
	fmt.Fprintf(stdout, "owners       %d alive\n", alive)
	l, err := outbox.New(db, nil, nil, nil, outbox.Config{Owner: "doctor"})
	if err != nil {
		return err
	}
	counts, err := l.Counts(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "obligations  pending %d, attempting %d, failed %d, delivered %d, abandoned %d\n",
		counts[outbox.StatePending], counts[outbox.StateAttempting], counts[outbox.StateFailed],
		counts[outbox.StateDelivered], counts[outbox.StateAbandoned])
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
