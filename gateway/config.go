package gateway

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"herald/cron"
	"herald/outbox"
)

// Defaults for Config (SPEC §7).
const (
	DefaultHome         = "./herald-data"
	DefaultAddr         = "127.0.0.1:8645"
	DefaultMaxBodyBytes = 1 << 20  // 1 MiB per request body
	DefaultMaxTextBytes = 64 << 10 // 64 KiB of message text
	DefaultDrainTimeout = 30 * time.Second
)

// Config is everything `herald serve` is told, from (highest precedence
// first) flags, the environment, a JSON config file, and the defaults.
type Config struct {
	// Home is the data directory (HERALD_HOME): the database, owner locks.
	Home string `json:"home"`
	// Addr is the listen address (HERALD_ADDR); port 0 picks a free port,
	// printed in the ready line.
	Addr string `json:"addr"`
	// Token, when set, is the bearer token every /v1 request must carry
	// (HERALD_TOKEN). Required when Addr is not a loopback address.
	Token string `json:"token"`
	// Platforms maps platform names to URLs (HERALD_PLATFORMS, --platform,
	// "platforms" in the file). "console" is always present unless
	// redefined.
	Platforms map[string]string `json:"platforms"`
	// Synchronous is SQLite's PRAGMA synchronous (HERALD_SYNCHRONOUS):
	// FULL (default), NORMAL, OFF or EXTRA.
	Synchronous string `json:"synchronous"`
	// MaxBodyBytes bounds a request body (HERALD_MAX_BODY_BYTES).
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// MaxTextBytes bounds one message's text in UTF-8 bytes, before
	// splitting (HERALD_MAX_TEXT_BYTES).
	MaxTextBytes int `json:"max_text_bytes"`
	// DrainTimeout bounds how long SIGTERM waits for deliveries in flight
	// (HERALD_DRAIN_TIMEOUT).
	DrainTimeout Duration `json:"drain_timeout"`
	// Concurrency is the most deliveries in flight (HERALD_CONCURRENCY).
	Concurrency int `json:"concurrency"`
	// PollInterval is how often an idle worker looks for other processes'
	// work, in real time (HERALD_POLL_INTERVAL).
	PollInterval Duration `json:"poll_interval"`
	// Outbox tuning; see outbox.Config. Env: HERALD_LEASE,
	// HERALD_SEND_TIMEOUT, HERALD_MAX_ATTEMPTS, HERALD_MAX_AGE,
	// HERALD_RETRY_BASE, HERALD_RETRY_MAX, HERALD_RETENTION.
	Lease       Duration `json:"lease"`
	SendTimeout Duration `json:"send_timeout"`
	MaxAttempts int      `json:"max_attempts"`
	MaxAge      Duration `json:"max_age"`
	RetryBase   Duration `json:"retry_base"`
	RetryMax    Duration `json:"retry_max"`
	Retention   Duration `json:"retention"`
	// TZ is the server zone for jobs without one (HERALD_TZ); empty means
	// the process's local zone.
	TZ string `json:"tz"`
	// Scheduler tuning (HERALD_CLAIM_TTL, HERALD_HEARTBEAT,
	// HERALD_ONESHOT_GRACE); see cron.Config.
	ClaimTTL     Duration `json:"claim_ttl"`
	Heartbeat    Duration `json:"heartbeat"`
	OneShotGrace Duration `json:"oneshot_grace"`
	// LogLevel is debug, info (default), warn or error (HERALD_LOG_LEVEL);
	// LogFormat is text (default) or json (HERALD_LOG_FORMAT).
	LogLevel  string `json:"log_level"`
	LogFormat string `json:"log_format"`
	// Seed seeds retry jitter (HERALD_SEED); 0 picks one at random. The seed
	// in use is logged at start so a run can be replayed.
	Seed uint64 `json:"seed"`
}

// Duration is a time.Duration that reads and writes Go duration text
// ("90s", "2h") in JSON.
type Duration time.Duration

// UnmarshalJSON reads "90s"-style text or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want Go duration text such as \"90s\" or \"2h\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want \"90s\" or seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes Go duration text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ErrUsage wraps configuration errors that are the operator's to fix; the
// command exits 2 on them.
var ErrUsage = errors.New("usage")

// LoadConfig builds the serve configuration from args (flags after `serve`),
// getenv and, if named by --config or HERALD_CONFIG, a JSON file. Errors wrap
// ErrUsage and name the setting at fault.
func LoadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := Config{}
	fs := flag.NewFlagSet("herald serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configPath = fs.String("config", "", "JSON config file (env HERALD_CONFIG)")
		home       = fs.String("home", "", "data directory (env HERALD_HOME, default "+DefaultHome+")")
		addr       = fs.String("addr", "", "listen address (env HERALD_ADDR, default "+DefaultAddr+")")
		platforms  multiFlag
	)
	fs.Var(&platforms, "platform", "NAME=URL, repeatable (env HERALD_PLATFORMS=NAME=URL,NAME=URL)")
	if err := fs.Parse(args); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}

	path := firstNonEmpty(*configPath, getenv("HERALD_CONFIG"))
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("%w: config file: %w", ErrUsage, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("%w: config file %s: %w", ErrUsage, path, err)
		}
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if *home != "" {
		cfg.Home = *home
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	if cfg.Platforms == nil {
		cfg.Platforms = map[string]string{}
	}
	flagged := map[string]bool{}
	for _, p := range platforms {
		name, url, ok := strings.Cut(p, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return cfg, fmt.Errorf("%w: --platform %q: want NAME=URL", ErrUsage, p)
		}
		if flagged[name] {
			return cfg, fmt.Errorf("%w: --platform %q: platform %q defined twice", ErrUsage, p, name)
		}
		flagged[name] = true
		cfg.Platforms[name] = strings.TrimSpace(url)
	}
	if err := cfg.fill(); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return cfg, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func applyEnv(cfg *Config, getenv func(string) string) error {
	str := map[string]*string{
		"HERALD_HOME": &cfg.Home, "HERALD_ADDR": &cfg.Addr, "HERALD_TOKEN": &cfg.Token,
		"HERALD_SYNCHRONOUS": &cfg.Synchronous, "HERALD_LOG_LEVEL": &cfg.LogLevel,
		"HERALD_LOG_FORMAT": &cfg.LogFormat, "HERALD_TZ": &cfg.TZ,
	}
	for k, p := range str {
		if v := getenv(k); v != "" {
			*p = v
		}
	}
	durs := map[string]*Duration{
		"HERALD_DRAIN_TIMEOUT": &cfg.DrainTimeout, "HERALD_POLL_INTERVAL": &cfg.PollInterval,
		"HERALD_LEASE": &cfg.Lease, "HERALD_SEND_TIMEOUT": &cfg.SendTimeout,
		"HERALD_MAX_AGE": &cfg.MaxAge, "HERALD_RETRY_BASE": &cfg.RetryBase,
		"HERALD_RETRY_MAX": &cfg.RetryMax, "HERALD_RETENTION": &cfg.Retention,
		"HERALD_CLAIM_TTL": &cfg.ClaimTTL, "HERALD_HEARTBEAT": &cfg.Heartbeat,
		"HERALD_ONESHOT_GRACE": &cfg.OneShotGrace,
	}
	for k, p := range durs {
		if v := getenv(k); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s=%q: %w", k, v, err)
			}
			*p = Duration(d)
		}
	}
	ints := map[string]*int{
		"HERALD_MAX_TEXT_BYTES": &cfg.MaxTextBytes, "HERALD_CONCURRENCY": &cfg.Concurrency,
		"HERALD_MAX_ATTEMPTS": &cfg.MaxAttempts,
	}
	for k, p := range ints {
		if v := getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: not an integer", k, v)
			}
			*p = n
		}
	}
	if v := getenv("HERALD_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("HERALD_MAX_BODY_BYTES=%q: not an integer", v)
		}
		cfg.MaxBodyBytes = n
	}
	if v := getenv("HERALD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("HERALD_SEED=%q: not an unsigned integer", v)
		}
		cfg.Seed = n
	}
	if v := getenv("HERALD_PLATFORMS"); v != "" {
		if cfg.Platforms == nil {
			cfg.Platforms = map[string]string{}
		}
		seen := map[string]bool{}
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			name, url, ok := strings.Cut(item, "=")
			name = strings.TrimSpace(name)
			if !ok {
				return fmt.Errorf("HERALD_PLATFORMS entry %q: want NAME=URL", item)
			}
			if seen[name] {
				return fmt.Errorf("HERALD_PLATFORMS: platform %q defined twice", name)
			}
			seen[name] = true
			cfg.Platforms[name] = strings.TrimSpace(url)
		}
	}
	return nil
}

func (c *Config) fill() error {
	if c.Home == "" {
		c.Home = DefaultHome
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if _, ok := c.Platforms["console"]; !ok {
		c.Platforms["console"] = "console:"
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxTextBytes <= 0 {
		c.MaxTextBytes = DefaultMaxTextBytes
	}
	if int64(c.MaxTextBytes) > c.MaxBodyBytes {
		return fmt.Errorf("max text bytes %d exceeds max body bytes %d", c.MaxTextBytes, c.MaxBodyBytes)
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = Duration(DefaultDrainTimeout)
	}
	if c.Concurrency < 0 || c.MaxAttempts < 0 || c.MaxTextBytes < 0 || c.MaxBodyBytes < 0 {
		return fmt.Errorf("concurrency, max attempts and byte limits must not be negative (0 takes the default)")
	}
	if c.Concurrency == 0 {
		c.Concurrency = outbox.DefaultConcurrency
	}
	for name, d := range map[string]Duration{"drain timeout": c.DrainTimeout, "poll interval": c.PollInterval,
		"lease": c.Lease, "send timeout": c.SendTimeout, "max age": c.MaxAge, "retry base": c.RetryBase,
		"retry max": c.RetryMax, "claim TTL": c.ClaimTTL, "heartbeat": c.Heartbeat, "one-shot grace": c.OneShotGrace} {
		if d < 0 {
			return fmt.Errorf("%s %s must not be negative (0 takes the default)", name, time.Duration(d))
		}
	}
	// Cross-field rules are checked here, so a bad combination is a usage
	// error naming both settings, before anything opens.
	if err := c.OutboxConfig("check").Validate(); err != nil {
		return err
	}
	base, most := time.Duration(c.RetryBase), time.Duration(c.RetryMax)
	if base == 0 {
		base = outbox.DefaultBackoffBase
	}
	if most == 0 {
		most = outbox.DefaultBackoffMax
	}
	if base > most {
		return fmt.Errorf("retry base %s exceeds retry max %s", base, most)
	}
	if sc, err := c.SchedulerConfig("check"); err != nil {
		return err
	} else if err := sc.Validate(); err != nil {
		return err
	}
	switch strings.ToUpper(c.Synchronous) {
	case "", "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return fmt.Errorf("synchronous %q: want OFF, NORMAL, FULL or EXTRA", c.Synchronous)
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log level %q: want debug, info, warn or error", c.LogLevel)
	}
	switch strings.ToLower(c.LogFormat) {
	case "", "text", "json":
	default:
		return fmt.Errorf("log format %q: want text or json", c.LogFormat)
	}
	if _, err := cron.ServerZone(c.TZ); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", c.Addr, err)
	}
	if c.Token == "" && !isLoopback(host) {
		return fmt.Errorf("listen address %q is not loopback: set HERALD_TOKEN so the API is not open to the network", c.Addr)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PlatformNames returns the configured platform names, sorted.
func (c Config) PlatformNames() []string {
	var out []string
	for n := range c.Platforms {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// OutboxConfig returns the outbox tuning for owner.
func (c Config) OutboxConfig(owner string) outbox.Config {
	return outbox.Config{
		Owner:       owner,
		Lease:       time.Duration(c.Lease),
		SendTimeout: time.Duration(c.SendTimeout),
		MaxAttempts: c.MaxAttempts,
		MaxAge:      time.Duration(c.MaxAge),
		BackoffBase: time.Duration(c.RetryBase),
		BackoffMax:  time.Duration(c.RetryMax),
		Retention:   time.Duration(c.Retention),
		Seed:        c.Seed,
	}
}

// SchedulerConfig returns the scheduler tuning for owner; the caller adds
// the platform hooks.
func (c Config) SchedulerConfig(owner string) (cron.Config, error) {
	zone, err := cron.ServerZone(c.TZ)
	if err != nil {
		return cron.Config{}, err
	}
	return cron.Config{
		Owner:        owner,
		ServerZone:   zone,
		ClaimTTL:     time.Duration(c.ClaimTTL),
		Heartbeat:    time.Duration(c.Heartbeat),
		OneShotGrace: time.Duration(c.OneShotGrace),
		PollInterval: time.Duration(c.PollInterval),
	}, nil
}
