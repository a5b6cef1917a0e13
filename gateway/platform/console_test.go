package platform_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"herald/gateway/platform"
	"herald/outbox"
)

func TestConsolePrintsOneBlockPerMessage(t *testing.T) {
	var out bytes.Buffer
	r := platform.Default(platform.Options{Console: &out})
	s, _ := r.Lookup("console")
	tests := []struct {
		name string
		m    outbox.Outgoing
		want string
	}{
		{"a one-line message", outbox.Outgoing{ObligationID: 7, ChatID: "ops", Text: "deploy done"},
			"[console] chat=ops msg=7: deploy done\n"},
		{"a message over several lines, as is", outbox.Outgoing{ObligationID: 8, ChatID: "ops", Text: "line 1\nline 2\n"},
			"[console] chat=ops msg=8: line 1\nline 2\n\n"},
		{"a marked redelivery", outbox.Outgoing{ObligationID: 9, ChatID: "c", Text: outbox.Marker + "hi", Redelivery: true},
			"[console] chat=c msg=9: [possible duplicate] hi\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out.Reset()
			id, err := s.Send(context.Background(), tt.m)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if want := fmt.Sprintf("console-%d", tt.m.ObligationID); id != want {
				t.Errorf("message id = %q, want %q", id, want)
			}
			if out.String() != tt.want {
				t.Errorf("printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// exclusiveWriter fails the test if two Writes overlap, and keeps each
// Write as one record.
type exclusiveWriter struct {
	t      *testing.T
	inside atomic.Int32
	mu     sync.Mutex
	writes []string
}

func (w *exclusiveWriter) Write(p []byte) (int, error) {
	if w.inside.Add(1) != 1 {
		w.t.Error("two writes to the console overlap")
	}
	defer w.inside.Add(-1)
	w.mu.Lock()
	w.writes = append(w.writes, string(p))
	w.mu.Unlock()
	return len(p), nil
}

func TestConcurrentConsoleSendsDoNotInterleave(t *testing.T) {
	w := &exclusiveWriter{t: t}
	c := platform.NewConsole(w)
	const senders, each = 16, 25
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				id := int64(g*each + i)
				text := fmt.Sprintf("first line of %d\nsecond line of %d", id, id)
				if _, err := c.Send(context.Background(), outbox.Outgoing{ObligationID: id, ChatID: "c", Text: text}); err != nil {
					t.Errorf("Send: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if len(w.writes) != senders*each {
		t.Fatalf("%d writes, want one per message (%d)", len(w.writes), senders*each)
	}
	seen := map[string]bool{}
	for _, b := range w.writes {
		var id int64
		if _, err := fmt.Sscanf(b, "[console] chat=c msg=%d:", &id); err != nil {
			t.Fatalf("block %q does not start with its header: %v", b, err)
		}
		want := fmt.Sprintf("[console] chat=c msg=%d: first line of %d\nsecond line of %d\n", id, id, id)
		if b != want {
			t.Errorf("block = %q, want %q", b, want)
		}
		seen[b] = true
	}
	if len(seen) != senders*each {
		t.Errorf("%d distinct blocks, want %d", len(seen), senders*each)
	}
}

// failingWriter writes n bytes and then fails.
type failingWriter struct{ n int }

func (w failingWriter) Write(p []byte) (int, error) {
	return min(w.n, len(p)), errors.New("disk full")
}

func TestConsoleWriteFailures(t *testing.T) {
	tests := []struct {
		name string
		w    io.Writer
		ctx  func() context.Context
		want outbox.ErrorClass
	}{
		{"nothing written is retryable", failingWriter{n: 0}, context.Background, outbox.ClassRetryable},
		{"a part written is ambiguous", failingWriter{n: 5}, context.Background, outbox.ClassAmbiguous},
		{"a done context writes nothing and is retryable", &bytes.Buffer{}, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, outbox.ClassRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := platform.NewConsole(tt.w).Send(tt.ctx(), outbox.Outgoing{ObligationID: 1, ChatID: "c", Text: "hello"})
			var se *outbox.SendError
			if !errors.As(err, &se) || se.Class != tt.want {
				t.Fatalf("Send error = %v, want class %s", err, tt.want)
			}
			if !strings.HasPrefix(se.Err.Error(), `send to console chat "c": `) {
				t.Errorf("error lacks its context: %v", se.Err)
			}
			if b, ok := tt.w.(*bytes.Buffer); ok && b.Len() != 0 {
				t.Errorf("printed %q after the context was done", b.String())
			}
		})
	}
}
