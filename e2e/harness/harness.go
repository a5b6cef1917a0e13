// Package harness drives the real herald and fakeplatform binaries as child
// processes for the black-box suites under e2e/: it builds them once per test
// binary, starts, SIGKILLs, SIGSTOPs and restarts them on one data directory,
// waits on conditions with deadlines (never on sleeps), and reads what the
// chat saw (the fake's journal) and what herald believes (its ledger).
//
// It imports nothing of herald's stack — only internal/clock, the one source
// of time every package shares, and the fake platform, which sits beside the
// stack: what it knows of herald is the black-box contract of SPEC §7 and the
// ledger's schema.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herald/internal/clock"
)

// Binaries are the built herald and fakeplatform executables.
type Binaries struct {
	Herald       string
	FakePlatform string
}

var (
	buildOnce sync.Once
	built     Binaries
	buildErr  error
)

// moduleRoot finds the directory holding go.mod above this source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("harness: cannot locate source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: go.mod not found")
		}
		dir = parent
	}
}

// Build compiles herald and fakeplatform once per test binary into a
// temporary directory and returns their paths.
func Build(tb testing.TB) Binaries {
	tb.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "herald-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = Binaries{Herald: filepath.Join(dir, "herald"), FakePlatform: filepath.Join(dir, "fakeplatform")}
		for out, pkg := range map[string]string{built.Herald: "./cmd/herald", built.FakePlatform: "./cmd/fakeplatform"} {
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
}

// Proc is one child process with its output captured to files (kept in the
// test's directory for post-mortems) and scanned for lines a test waits on.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	lines   []string // stdout and stderr lines, in arrival order per stream
	notify  chan struct{}
	waitErr error
}

// Start runs bin with args and env (added to a minimal environment) and
// captures its output under logDir as NAME.stdout / NAME.stderr.
func Start(tb testing.TB, name, logDir, bin string, env []string, args ...string) *Proc {
	tb.Helper()
	return StartIn(tb, "", name, logDir, bin, env, args...)
}

// StartIn is Start with the child's working directory set to dir.
func StartIn(tb testing.TB, dir, name, logDir, bin string, env []string, args ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{}), notify: make(chan struct{})}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	outFile, err := os.OpenFile(filepath.Join(logDir, name+".stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	errFile, err := os.OpenFile(filepath.Join(logDir, name+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	var wg sync.WaitGroup
	for _, s := range []struct {
		r io.Reader
		f *os.File
	}{{stdout, outFile}, {stderr, errFile}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.f.Close()
			sc := bufio.NewScanner(s.r)
			sc.Buffer(make([]byte, 64*1024), 4<<20)
			for sc.Scan() {
				line := sc.Text()
				s.f.WriteString(line + "\n")
				p.mu.Lock()
				p.lines = append(p.lines, line)
				close(p.notify)
				p.notify = make(chan struct{})
				p.mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		close(p.notify)
		p.notify = make(chan struct{})
		p.mu.Unlock()
		close(p.done)
	}()
	tb.Cleanup(func() { p.Kill() })
	return p
}

// Pid returns the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Lines returns every output line so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLine waits until some output line matches re, and returns its
// submatches. It fails when the process exits first or the deadline passes.
func (p *Proc) WaitLine(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	seen := 0
	for {
		p.mu.Lock()
		lines, notify := p.lines, p.notify
		p.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if m := re.FindStringSubmatch(lines[seen]); m != nil {
				return m, nil
			}
		}
		select {
		case <-p.done:
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if n > seen {
				continue
			}
			return nil, fmt.Errorf("%s exited (%v) before printing a line matching %q; last lines:\n%s", p.Name, p.ExitErr(), re, tail(p.Lines(), 15))
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no line matching %q: %w; last lines:\n%s", p.Name, re, ctx.Err(), tail(p.Lines(), 15))
		case <-notify:
		}
	}
}

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// HasLine reports whether some line so far contains s.
func (p *Proc) HasLine(s string) bool {
	for _, l := range p.Lines() {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// Kill SIGKILLs the child's whole process group and waits for it to exit.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Signal sends sig to the child process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the child to exit, or ctx.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s did not exit: %w", p.Name, ctx.Err())
	}
}

// Exited reports whether the child has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr is the child's exit error (nil for status 0), once exited.
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// ExitedBySignal reports whether the child died of sig.
func (p *Proc) ExitedBySignal(sig syscall.Signal) bool {
	if !p.Exited() {
		return false
	}
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && st.Signaled() && st.Signal() == sig
}

// ExitCode is the child's exit status, or -1 if it died of a signal.
func (p *Proc) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Eventually polls cond until it returns nil or the deadline passes, and
// returns cond's last error wrapped with what was awaited. The poll interval
// is short; the deadline is the only bound.
func Eventually(ctx context.Context, what string, cond func() error) error {
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		if clock.Sleep(ctx, clock.Real{}, 20*time.Millisecond) != nil {
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		}
	}
}

// JSON does an HTTP request with a JSON body and decodes a JSON answer into
// out (when not nil). It returns the status code.
func JSON(ctx context.Context, method, url string, body, out any, header ...string) (int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer %q: %w", method, url, b, err)
		}
	}
	return resp.StatusCode, nil
}

// JobProcessAlive reports whether pid names a live process whose
// environment holds envEntry ("KEY=VALUE"): a job process a test planted,
// told apart from an unrelated process that reused its pid (pid_max may be
// as low as 32768, and long suites churn through pids).
func JobProcessAlive(pid int, envEntry string) bool {
	if !ProcessAlive(pid) {
		return false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(append(append([]byte{0}, env...), 0), []byte("\x00"+envEntry+"\x00"))
}

// ProcessAlive reports whether pid names a live process: it exists and is
// not a zombie (a container's init may never reap orphans). A pid may have
// been reused: see JobProcessAlive.
func ProcessAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}
