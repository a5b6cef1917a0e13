// Command fakeplatform runs the stand-in chat platform of herald's tests.
//
//	fakeplatform serve --addr 127.0.0.1:0 --journal FILE [--dedup-window 10m]
//	    [--webhook-secret whsec_…] [--webhook-tolerance 5m] [--verbose]
//
// On start it prints one line to stdout,
//
//	fakeplatform: listening on http://127.0.0.1:PORT
//
// and serves until SIGTERM or SIGINT, when it releases held requests, closes
// the journal and exits 0. Bad flags exit 2 with a one-line error. With
// HERALD_CLOCK_FILE set, journal timestamps and the dedup window follow that
// virtual clock. See fakeplatform/README.md for the HTTP API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"herald/fakeplatform"
	"herald/internal/clock"
)

const usage = `usage: fakeplatform serve --journal FILE [--addr 127.0.0.1:0] [--dedup-window 10m]
                         [--webhook-secret whsec_…] [--webhook-tolerance 5m] [--verbose]
`

// shutdownTimeout bounds the graceful shutdown of the HTTP server.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	m := NewMain(stdout, stderr, getenv)
	if err := m.ParseFlags(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "fakeplatform: %v\n", err)
		return 2
	}
	runErr := m.Run(ctx)
	closeErr := m.Close()
	if err := errors.Join(runErr, closeErr); err != nil {
		fmt.Fprintf(stderr, "fakeplatform: %v\n", err)
		return 1
	}
	return 0
}

// Main wires the fake platform: flags, clock, server, listener, shutdown.
type Main struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	// Addr is the listen address (--addr); default 127.0.0.1:0.
	Addr string
	// JournalPath is the journal file (--journal); required.
	JournalPath string
	// DedupWindow is discord's idempotency-key window (--dedup-window).
	DedupWindow time.Duration
	// WebhookSecret is the secret the webhook receiver verifies signatures
	// with (--webhook-secret); empty refuses every webhook delivery.
	WebhookSecret string
	// WebhookTolerance is the webhook-timestamp tolerance
	// (--webhook-tolerance).
	WebhookTolerance time.Duration
	// Verbose logs every accepted operation (--verbose).
	Verbose bool

	closeClock func() error
	fake       *fakeplatform.Server
	http       *http.Server
	serveErr   chan error
}

// NewMain returns a Main writing to stdout and stderr and reading the
// environment through getenv.
func NewMain(stdout, stderr io.Writer, getenv func(string) string) *Main {
	return &Main{stdout: stdout, stderr: stderr, getenv: getenv}
}

// ParseFlags reads the command line: the "serve" subcommand and its flags.
func (m *Main) ParseFlags(args []string) error {
	if len(args) == 0 {
		return errors.New(`missing command (want "serve"); try "fakeplatform serve --help"`)
	}
	switch args[0] {
	case "serve":
	case "-h", "-help", "--help", "help":
		return flag.ErrHelp
	default:
		return fmt.Errorf("unknown command %q (want \"serve\")", args[0])
	}
	fs := flag.NewFlagSet("fakeplatform serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&m.Addr, "addr", "127.0.0.1:0", "listen address (loopback by default; port 0 picks a free port)")
	fs.StringVar(&m.JournalPath, "journal", "", "journal file (created if missing, replayed if present); required")
	fs.DurationVar(&m.DedupWindow, "dedup-window", fakeplatform.DefaultDedupWindow, "how long discord remembers an idempotency key")
	fs.StringVar(&m.WebhookSecret, "webhook-secret", "", "Standard Webhooks secret (whsec_<base64>) the receiver at POST /webhook/{receiver} verifies signatures with")
	fs.DurationVar(&m.WebhookTolerance, "webhook-tolerance", fakeplatform.DefaultWebhookTolerance, "how far a webhook-timestamp may lie from the clock")
	fs.BoolVar(&m.Verbose, "verbose", false, "log every accepted operation")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("serve: %w", err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	case m.JournalPath == "":
		return errors.New("serve: --journal is required")
	case m.DedupWindow <= 0:
		return fmt.Errorf("serve: --dedup-window must be positive, got %v", m.DedupWindow)
	case m.WebhookTolerance <= 0:
		return fmt.Errorf("serve: --webhook-tolerance must be positive, got %v", m.WebhookTolerance)
	}
	if m.WebhookSecret != "" {
		if _, err := fakeplatform.WebhookKey(m.WebhookSecret); err != nil {
			return fmt.Errorf("serve: --webhook-secret: %w", err)
		}
	}
	return nil
}

// Run opens the journal, starts listening, prints the listening line and
// serves until ctx is done or serving fails. Close shuts it down.
func (m *Main) Run(ctx context.Context) error {
	clk, closeClock, err := clock.FromEnv(m.getenv)
	if err != nil {
		return fmt.Errorf("build clock: %w", err)
	}
	m.closeClock = closeClock
	level := slog.LevelInfo
	if m.Verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(m.stderr, &slog.HandlerOptions{Level: level}))
	m.fake, err = fakeplatform.New(fakeplatform.Config{
		JournalPath: m.JournalPath, Clock: clk, DedupWindow: m.DedupWindow, Logger: logger,
		WebhookSecret: m.WebhookSecret, WebhookTolerance: m.WebhookTolerance,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", m.Addr, err)
	}
	m.http = &http.Server{Handler: m.fake.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	m.serveErr = make(chan error, 1)
	go func() { m.serveErr <- m.http.Serve(ln) }()
	fmt.Fprintf(m.stdout, "fakeplatform: listening on http://%s\n", ln.Addr())
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.serveErr:
		return fmt.Errorf("serve: %w", err)
	}
}

// Close shuts down gracefully: it stops accepting connections, releases
// every held request, waits for requests in flight, closes the journal and
// stops the clock.
func (m *Main) Close() error {
	var errs []error
	if m.http != nil {
		shutdown := make(chan error, 1)
		go func() {
			ctx, cancel := clock.WithTimeout(context.Background(), clock.Real{}, shutdownTimeout)
			defer cancel()
			err := m.http.Shutdown(ctx)
			if err != nil {
				err = errors.Join(fmt.Errorf("shut down http server: %w", err), m.http.Close())
			}
			shutdown <- err
		}()
		// Held requests keep Shutdown waiting until the fake releases them.
		errs = append(errs, m.fake.Close(), <-shutdown)
	} else if m.fake != nil {
		errs = append(errs, m.fake.Close())
	}
	if m.closeClock != nil {
		errs = append(errs, m.closeClock())
	}
	return errors.Join(errs...)
}
