// Command herald is the messaging gateway: `herald serve` runs it; the other
// subcommands talk to a running one or inspect its data directory.
//
// Exit status: 0 success, 1 runtime failure, 2 usage error (SPEC §7).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `herald — a messaging gateway with an exactly-once delivery outbox

usage:
  herald serve [--addr A] [--home DIR] [--platform NAME=URL ...] [--config FILE]
  herald send [--platform NAME (default console)] --chat ID --text TEXT|- [--key K] [--wait D]
  herald jobs add --name NAME --spec SPEC [--zone ZONE] [--anchor T]
                  (--text TEMPLATE | --exec 'CMD ARGS' [--arg A ...] | --http-url URL
                   [--http-method M] [--http-header 'N: V' ...] [--http-body B])
                  [--platform NAME] [--chat ID] [--catchup latest|skip|all] [--catchup-cap N]
                  [--grace D] [--budget D] [--rerun-interrupted] [--paused]
  herald jobs ls [--json]
  herald jobs show|rm|pause|resume NAME|ID
  herald jobs run NAME|ID [--wait D]
  herald jobs history NAME|ID [--limit N] [--json]
  herald cron preview --spec SPEC [--tz ZONE] --from T --to T [--anchor T] [--json] [--max N]
  herald ledger ls [--open] [--limit N] | show ID | stats   [--home DIR] [--json]
  herald doctor [--home DIR]
  herald faults list
  herald clock set --file PATH INSTANT | advance --file PATH DURATION | show --file PATH
  herald version

jobs talks to a running herald (--addr, else HERALD_ADDR; token HERALD_TOKEN); a job is
named by its name or id. --exec is split on white space without shell quoting; each --arg
is appended verbatim (--exec sh --arg -c --arg 'a; b'). run --wait exits 1 unless the run
succeeded in time. An API refusal prints the server's message: exit 2 for HTTP 400 (an
invalid request: bad spec, zone, action), 1 otherwise (not found, conflict, unreachable).
cron preview prints every occurrence in [--from, --to) (RFC 3339 instants), one per line
with its local offset; intervals need --anchor; more than --max (default 10000) is an error.

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
		err = send(ctx, args[1:], getenv, stdout)
	case "jobs":
		err = jobsCmd(ctx, args[1:], getenv, stdout)
	case "cron":
		err = cronCmd(args[1:], getenv, stdout)
	case "ledger":
		err = ledgerCmd(ctx, args[1:], getenv, stdout)
	case "doctor":
		err = doctor(ctx, args[1:], getenv, stdout)
	case "faults":
		err = faultsCmd(args[1:], stdout)
	case "clock":
		err = clockCmd(args[1:], stdout)
	case "version":
		fmt.Fprintln(stdout, "herald", version())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0 // -h printed the flags
	}
	fmt.Fprintln(stderr, "herald:", err)
	if isUsage(err) {
		return 2
	}
	return 1
}
