// Command herald is the messaging gateway: `herald serve` runs it; the other
// subcommands talk to a running one or inspect its data directory.
//
// Exit status: 0 success, 1 runtime failure, 2 usage error (SPEC §7).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `herald — a messaging gateway with an exactly-once delivery outbox

usage:
  herald serve [--addr A] [--home DIR] [--platform NAME=URL ...] [--config FILE]
  herald send --platform NAME --chat ID --text TEXT [--key K] [--wait]
  herald ledger ls|show ID|stats [--home DIR] [--json]
  herald doctor [--home DIR]
  herald faults list
  herald clock set|advance --file PATH (INSTANT | DURATION)
  herald version

Environment: HERALD_HOME, HERALD_ADDR, HERALD_TOKEN, HERALD_PLATFORMS, HERALD_CLOCK_FILE,
HERALD_FAULTS and the tuning variables listed in the README.
`

// errUsage marks an error the user fixes by changing the command line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and turns its error into an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stdout, stderr)
	case "send":
		err = send(ctx, args[1:], getenv, stdout, stderr)
	case "ledger":
		err = ledgerCmd(ctx, args[1:], getenv, stdout, stderr)
	case "doctor":
		err = doctor(ctx, args[1:], getenv, stdout, stderr)
	case "faults":
		err = faultsCmd(args[1:], stdout)
	case "clock":
		err = clockCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "herald", version())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "herald:", err)
	if isUsage(err) {
		return 2
	}
	return 1
}
