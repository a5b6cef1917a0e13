// Package owner gives each herald process an identity that other processes on
// the same host can prove dead.
//
// A process holds an exclusive flock on $HERALD_HOME/locks/owner-<id>.lock
// for its whole life (SPEC §4). The kernel releases the lock when the process
// dies, however it dies (SIGKILL included), so another process that can take
// the lock knows the owner is gone — at once, without waiting for a lease.
// A stalled owner (SIGSTOP, a frozen VM) still holds its lock: rows it claimed
// are reclaimed only after their lease expires. flock is per host: over a
// network filesystem liveness must fall back to leases alone.
package owner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gofrs/flock"
)

// LockDir is the lock directory's name inside HERALD_HOME.
const LockDir = "locks"

// Owner is this process's identity and the lock that proves it alive.
type Owner struct {
	id   string
	lock *flock.Flock
}

// NewID returns a fresh owner id: 16 random hex digits. Ids are never
// reused, so a lock file always names one process's life.
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("owner id: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// Acquire creates this process's owner lock under home/locks and holds it
// until Release. It fails if the lock cannot be created or taken.
func Acquire(home string) (*Owner, error) {
	dir := filepath.Join(home, LockDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("acquire owner lock: %w", err)
	}
	id := NewID()
	l := flock.New(lockPath(home, id))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("acquire owner lock %s: %w", l.Path(), err)
	}
	if !ok {
		return nil, fmt.Errorf("acquire owner lock %s: held by another process", l.Path())
	}
	return &Owner{id: id, lock: l}, nil
}

// ID returns the owner id stamped on the rows this process claims.
func (o *Owner) ID() string { return o.id }

// Release drops the lock and removes its file.
func (o *Owner) Release() error {
	path := o.lock.Path()
	err := o.lock.Unlock()
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

func lockPath(home, id string) string {
	return filepath.Join(home, LockDir, "owner-"+id+".lock")
}

// Liveness answers "is owner X alive?" for owners on this host, by trying
// their locks. It is safe for concurrent use.
type Liveness struct {
	home string
	self string
	mu   sync.Mutex
}

// NewLiveness checks owners whose locks live under home. self (may be empty)
// is reported alive without touching the file system.
func NewLiveness(home, self string) *Liveness { return &Liveness{home: home, self: self} }

// Alive reports whether the owner with this id still holds its lock. An
// owner whose lock file is missing, or whose lock can be taken, is dead: a
// living owner keeps its file locked from before it claims anything until it
// exits. A lock taken to test it is released at once, and its file removed.
// Errors other than "locked" are reported as alive (we never reclaim on a
// guess).
func (l *Liveness) Alive(id string) bool {
	if id == "" {
		return false
	}
	if id == l.self {
		return true
	}
	if strings.ContainsAny(id, `/\`) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	path := lockPath(l.home, id)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false
	}
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if !ok {
		return true
	}
	os.Remove(path)
	fl.Unlock()
	return false
}
