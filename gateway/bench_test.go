package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/gateway"
	"herald/gateway/platform"
	"herald/internal/clock"
)

// BenchmarkAcceptToDelivered measures POST /v1/messages → delivered on the
// fake platform (no faults) with synchronous=FULL, over 50 chats: the
// figure is messages per second, b.N messages per run.
func BenchmarkAcceptToDelivered(b *testing.B) {
	dir := b.TempDir()
	fake, err := fakeplatform.New(fakeplatform.Config{JournalPath: filepath.Join(dir, "journal.jsonl"), Clock: clock.Real{}})
	if err != nil {
		b.Fatal(err)
	}
	fsrv := httptest.NewServer(fake.Handler())
	defer fsrv.Close()
	defer fake.Close()

	env := map[string]string{"HERALD_HOME": filepath.Join(dir, "home"), "HERALD_ADDR": "127.0.0.1:0",
		"HERALD_SYNCHRONOUS": "FULL", "HERALD_CONCURRENCY": "64", "HERALD_POLL_INTERVAL": "50ms"}
	cfg, err := gateway.LoadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	reg := platform.NewRegistry()
	if err := reg.AddSpec("chat=fake:"+fsrv.URL+"?profile=telegram", platform.Options{}); err != nil {
		b.Fatal(err)
	}
	g, err := gateway.Open(context.Background(), cfg, gateway.Deps{Clock: clock.Real{}, Platforms: reg, Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- g.Run(ctx) }()
	api := httptest.NewServer(g.Handler())
	defer api.Close()

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	const chats = 50
	for c := 0; c < chats; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < b.N; i += chats {
				body := fmt.Sprintf(`{"platform":"chat","chat_id":"c%d","text":"benchmark message %d"}`, c, i)
				resp, err := http.Post(api.URL+"/v1/messages", "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	for {
		counts, err := g.Ledger().Counts(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if counts["delivered"] == b.N {
			break
		}
		clock.Sleep(context.Background(), clock.Real{}, time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	cancel()
	<-runDone
}

// BenchmarkFsync measures the machine's raw fsync rate in the same kind of
// directory, so the throughput figure can be read against it.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "fsyncs/s")
}
