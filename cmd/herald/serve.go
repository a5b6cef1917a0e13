package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"

	"herald/gateway"
	"herald/gateway/platform"
	"herald/internal/clock"
	"herald/internal/faultpoint"
)

func isUsage(err error) bool {
	return errors.Is(err, errUsage) || errors.Is(err, gateway.ErrUsage) || errors.Is(err, faultpoint.ErrUnknownPoint) ||
		errors.As(err, new(*platform.SpecError))
}

// newLogger builds the process logger on stderr.
func newLogger(stderr io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(strings.ToUpper(firstNonEmpty(level, "info"))))
	opts := &slog.HandlerOptions{Level: lv}
	if strings.EqualFold(format, "json") {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// serve wires the clock, fault points, platforms and gateway, and runs it
// until ctx ends (SIGTERM/SIGINT), then drains.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := gateway.LoadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	clk, closeClock, err := clock.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer closeClock()
	faults, err := faultpoint.Parse(getenv(faultpoint.EnvFaults), clk, stderr)
	if err != nil {
		return err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	opts := platform.Options{Clock: clk, Console: stdout}
	reg := platform.NewRegistry()
	for _, name := range cfg.PlatformNames() {
		if err := reg.AddSpec(name+"="+cfg.Platforms[name], opts); err != nil {
			return err
		}
	}
	defer reg.Close()
	log.Info("herald starting", "home", cfg.Home, "addr", cfg.Addr, "platforms", reg.String(),
		"seed", cfg.Seed, "faults", strings.Join(faults.ArmedNames(), ","), "virtual_clock", getenv(clock.EnvFile) != "")
	g, err := gateway.Open(ctx, cfg, gateway.Deps{Clock: clk, Faults: faults, Log: log, Platforms: reg, Stdout: stdout})
	if err != nil {
		return err
	}
	defer g.Close()
	return g.Run(ctx)
}
