package clock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// EnvFile names the environment variable that switches a process to the
// file-backed virtual clock (SPEC §6).
const EnvFile = "HERALD_CLOCK_FILE"

// FilePollInterval is how often, in real time, a File clock re-reads its file
// to fire timers. Now always reads the file itself.
const FilePollInterval = 2 * time.Millisecond

// File is a virtual clock whose time is the instant written in a file (one
// RFC 3339 UTC instant with nanoseconds). Every process pointed at the same
// file sees the same time; timers fire when the file's time passes their
// deadline. Writers replace the file atomically (WriteFile).
type File struct {
	path string
	m    *Manual

	mu   sync.Mutex
	last time.Time // last instant read successfully

	stop chan struct{}
	done chan struct{}
}

// OpenFile returns a File clock reading path, which must already hold a
// valid instant. Close stops its poller.
func OpenFile(path string) (*File, error) {
	t, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{path: path, m: NewManual(t), last: t, stop: make(chan struct{}), done: make(chan struct{})}
	go f.poll()
	return f, nil
}

// Now reads the file and returns its instant. If the file cannot be read
// (a writer is between write and rename on a filesystem without atomic
// rename), it returns the last instant it read.
func (f *File) Now() time.Time {
	t, err := ReadFile(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.last = t
	}
	return f.last
}

// NewTimer returns a timer that fires when the file's time reaches
// Now()+d.
func (f *File) NewTimer(d time.Duration) Timer {
	now := f.Now()
	f.m.Set(now)
	return f.m.NewTimer(d)
}

// Close stops the poller. Timers not yet fired never fire.
func (f *File) Close() error {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	return nil
}

func (f *File) poll() {
	defer close(f.done)
	tk := time.NewTicker(FilePollInterval)
	defer tk.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tk.C:
			f.m.Set(f.Now())
		}
	}
}

// ReadFile reads the instant held in a clock file.
func ReadFile(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("read clock file: %w", err)
	}
	s := string(bytes.TrimSpace(b))
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("read clock file %s: %q is not an RFC 3339 instant: %w", path, s, err)
	}
	return t.UTC(), nil
}

// WriteFile atomically replaces the clock file at path with t (UTC, RFC 3339
// with nanoseconds): it writes a temporary file in the same directory, syncs
// it and renames it over path, so a reader sees the old or the new instant,
// never a torn one.
func WriteFile(path string, t time.Time) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".clock-*")
	if err != nil {
		return fmt.Errorf("write clock file: %w", err)
	}
	name := tmp.Name()
	_, werr := tmp.WriteString(t.UTC().Format(time.RFC3339Nano) + "\n")
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(name)
		return fmt.Errorf("write clock file: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("write clock file: %w", err)
	}
	return nil
}

// FromEnv returns the File clock named by HERALD_CLOCK_FILE when it is set,
// else Real. The returned close function stops a File clock's poller.
func FromEnv(getenv func(string) string) (Clock, func() error, error) {
	path := strings.TrimSpace(getenv(EnvFile))
	if path == "" {
		return Real{}, func() error { return nil }, nil
	}
	f, err := OpenFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", EnvFile, err)
	}
	return f, f.Close, nil
}
