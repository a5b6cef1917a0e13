package owner_test

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"herald/internal/owner"
)

func TestAnOwnerIsAliveUntilReleased(t *testing.T) {
	home := t.TempDir()
	o, err := owner.Acquire(home)
	if err != nil {
		t.Fatal(err)
	}
	lv := owner.NewLiveness(home, "")
	if !lv.Alive(o.ID()) {
		t.Fatal("a held owner lock reads as dead")
	}
	if err := o.Release(); err != nil {
		t.Fatal(err)
	}
	if lv.Alive(o.ID()) {
		t.Fatal("a released owner reads as alive")
	}
	if lv.Alive("0123456789abcdef") || lv.Alive("") || lv.Alive("../x") {
		t.Fatal("an unknown owner reads as alive")
	}
}

// TestAKilledOwnerIsSeenDeadAtOnce SIGKILLs a child holding an owner lock.
func TestAKilledOwnerIsSeenDeadAtOnce(t *testing.T) {
	if home := os.Getenv("OWNER_CHILD_HOME"); home != "" {
		o, err := owner.Acquire(home)
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(o.ID() + "\n")
		select {}
	}
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAKilledOwnerIsSeenDeadAtOnce$")
	cmd.Env = append(os.Environ(), "OWNER_CHILD_HOME="+home)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 17)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(buf))
	lv := owner.NewLiveness(home, "")
	if !lv.Alive(id) {
		t.Fatal("a living child reads as dead")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !lv.Alive(id) {
		t.Fatal("a stopped child reads as dead: only its lease may free its rows")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if lv.Alive(id) {
		t.Fatal("a SIGKILLed child reads as alive")
	}
}
