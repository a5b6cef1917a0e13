// Command redproof shows that herald's tests can fail: each patch in
// patches/ puts back one classic bug; redproof applies it to a scratch copy
// of the repository, runs the tests that guard against that bug, and
// expects them to go red with the invariant they name.
//
//	go run ./e2e/redproof            # every patch
//	go run ./e2e/redproof -only heartbeat-disabled,claim-without-cas
//	go run ./e2e/redproof -list
//
// It exits 1 if any patch leaves its tests green (a test that cannot fail is
// a defect), or fails to apply. It is documented in e2e/README.md and not run
// on every commit: it takes several minutes.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"herald/internal/clock"
)

// proof is one patch and the tests that must catch it.
type proof struct {
	Name   string   // patches/<Name>.patch
	Bug    string   // what the patch puts back
	Pkgs   []string // packages to test
	Run    string   // -run regexp
	Expect string   // a line the failure must print (the broken invariant)
}

var proofs = []proof{
	{"boot-sweep-resends-without-claim", "the boot sweep resends an orphaned row without claiming it (no move to attempting, no fencing token bump)",
		[]string{"./e2e/delivery"}, "TestConcurrentRebootersClaimEachRowOnce", "the three boot sweeps claimed"},
	{"claim-without-cas", "a claim updates the row without the compare-and-swap on state and fencing token",
		[]string{"./outbox"}, "TestConcurrentClaimersTakeEachRowExactlyOnce", "claimed by"},
	{"skip-mark-delivered", "a successful send is never marked delivered",
		[]string{"./outbox"}, "TestOnlyTheHeadOfAChatIsClaimedAndChatsRunInParallel", "after the heads settled"},
	{"redelivery-unmarked", "a copy that may repeat an earlier one goes out without the marker",
		[]string{"./e2e/delivery"}, "TestKillAtEachDeliveryFaultPoint/telegram/outbox.sent", "unmarked copies"},
	{"next-occurrence-in-utc", "the next occurrence is computed on UTC's wall clock instead of the job's zone",
		[]string{"./cron"}, "TestEveryOccurrenceFiresOnceAcrossTheSpringGap", "fired"},
	{"manual-run-moves-next-occurrence", "a manual run consumes the job's next scheduled occurrence",
		[]string{"./cron"}, "TestAManualRunNeverMovesTheNextOccurrence", "manual run"},
	{"heartbeat-disabled", "the heartbeat never refreshes the fire claim",
		[]string{"./cron"}, "TestTheHeartbeatKeepsALongRunsClaim", "heartbeat"},
	{"heartbeat-waits-on-job-lock", "the heartbeat waits on a lock the running job holds",
		[]string{"./cron"}, "TestTheHeartbeatKeepsALongRunsClaim", "heartbeat"},
	{"no-cross-process-exclusion", "no compare-and-swap on next_run_at and no unique (job, kind, slot): replicas both fire",
		[]string{"./cron"}, "TestTwoSchedulersFireEachOccurrenceOnce", "executions for 8 occurrences"},
	{"fold-on-naive-wall-time", "a fixed-time spec compares wall readings naively and fires in both passes of a fold",
		[]string{"./cron"}, "TestOccurrencesReproduceTheHandWorkedDSTCases|TestTheSchedulerAgreesWithTheOracle", "fold"},
	{"gap-resolved-with-time-date", "a wall time in a gap is resolved with time.Date (New York 02:30 → 01:30 EST)",
		[]string{"./cron"}, "TestOccurrencesReproduceTheHandWorkedDSTCases|TestNextGetsRobfigsDSTBugCasesRight", "gap"},
	{"dead-owner-unseen", "a dead owner's executions are only recovered when their claims expire",
		[]string{"./e2e/cron"}, "TestKillAtEachCronFaultPoint", "none interrupted"},
	{"orphan-job-processes-left", "a dead owner's job processes are left running",
		[]string{"./e2e/cron"}, "TestKillAtEachCronFaultPoint/cron.heartbeat", "outlived its run"},
}

func main() {
	only := flag.String("only", "", "comma-separated patch names (default: all)")
	list := flag.Bool("list", false, "list the patches and exit")
	timeout := flag.Duration("timeout", 10*time.Minute, "per-patch test timeout")
	flag.Parse()
	root, err := moduleRoot()
	if err != nil {
		fatal(err)
	}
	if *list {
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		for _, p := range proofs {
			fmt.Fprintf(tw, "%s\t%s\t%s -run '%s'\n", p.Name, p.Bug, strings.Join(p.Pkgs, " "), p.Run)
		}
		tw.Flush()
		return
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	green := 0
	for _, p := range proofs {
		if len(want) > 0 && !want[p.Name] {
			continue
		}
		rc := clock.Real{}
		start := rc.Now()
		red, line, err := try(root, p, *timeout)
		took := clock.Since(rc, start).Round(time.Second)
		switch {
		case err != nil:
			green++
			fmt.Printf("ERROR %-34s %v\n", p.Name, err)
		case !red:
			green++
			fmt.Printf("GREEN %-34s the tests still pass: they do not guard against %q (%s)\n", p.Name, p.Bug, took)
		default:
			fmt.Printf("red   %-34s %s (%s)\n", p.Name, line, took)
		}
	}
	if green > 0 {
		fmt.Printf("%d patch(es) did not turn the tests red\n", green)
		os.Exit(1)
	}
}

// try applies p to a scratch copy and runs its tests; red reports a failure
// that printed p.Expect, with the first line that did.
func try(root string, p proof, timeout time.Duration) (bool, string, error) {
	scratch, err := os.MkdirTemp("", "herald-redproof-")
	if err != nil {
		return false, "", err
	}
	defer os.RemoveAll(scratch)
	if err := copyTree(root, scratch); err != nil {
		return false, "", fmt.Errorf("copy repository: %w", err)
	}
	patch := filepath.Join(root, "e2e", "redproof", "patches", p.Name+".patch")
	apply := exec.Command("git", "apply", patch)
	apply.Dir = scratch
	if out, err := apply.CombinedOutput(); err != nil {
		return false, "", fmt.Errorf("git apply %s: %v: %s", p.Name, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append([]string{"test", "-count=1", "-run", p.Run}, p.Pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = scratch
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err == nil {
		return false, "", nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false, "", err
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, p.Expect) {
			return true, strings.TrimSpace(l), nil
		}
	}
	return false, "", fmt.Errorf("tests failed, but no line names the invariant %q:\n%s", p.Expect, tail(out.String(), 20))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// copyTree copies the repository's files (not .git, not data directories)
// to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "herald-data") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		info, _ := d.Info()
		outF, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode())
		if err != nil {
			return err
		}
		_, err = io.Copy(outF, in)
		return errors.Join(err, outF.Close())
	})
}

func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		return "", errors.New("go.mod not found")
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "redproof:", err)
	os.Exit(2)
}
