package shell

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// Config configures a Runtime: explicit values with defaults (see
// DefaultConfig), which FromEnv can override for deployment. A zero field
// means its default, so Config{Workers: 4} is a complete configuration;
// DefaultConfig lists the defaults.
type Config struct {
	// Workers is the number of worker goroutines. It is the one setting
	// whose zero is not its default: zero runs none, for a web process that
	// appends and handles commands synchronously while another process
	// runs the workers. DefaultConfig has 2.
	Workers int
	// BatchSize caps the messages of one claim.
	BatchSize int
	// BatchesPerHandle caps how many batches of one reactor a worker
	// handles per round (see RouterOptions.BatchesPerHandle): a pure
	// reactor's in one write transaction, any other's each acknowledged in
	// the transaction that claims the next.
	BatchesPerHandle int
	// InlineBudget bounds how long one write transaction of a pure reactor
	// goes on claiming further batches (see RouterOptions.InlineBudget).
	InlineBudget time.Duration
	// MaxDrainRounds is how many rounds (of up to BatchesPerHandle batches
	// each) a worker takes from one reactor before it yields to the others.
	MaxDrainRounds int
	// CatchUpInterval is how often every reactor is polled, the safety net
	// for notifications that never arrive (appends by other processes).
	CatchUpInterval time.Duration
	// WakeCooldown spaces a reactor's claims under a steady stream of
	// appends: a worker's round of a reactor (its claims, handled and
	// acknowledged) that handled work and caught up is followed by the
	// next no sooner than WakeCooldown after it started. An append that
	// wakes the reactor sooner waits out the rest, and the round then
	// takes every append made meanwhile: fewer and larger transactions
	// for at most a cooldown's latency. An append to a reactor whose last
	// round found nothing (a quiet spell) is claimed at once, and a round
	// that stopped at a cap with work left (BatchesPerHandle,
	// InlineBudget: a backlog) is followed at once. The worker serves the
	// other reactors meanwhile. Negative: none, every append claimed as
	// soon as a worker is free. Default DefaultWakeCooldown.
	WakeCooldown time.Duration
	// HeartbeatInterval is how often workers heartbeat and stale claims
	// are reaped.
	HeartbeatInterval time.Duration
	// ClaimTTL is how long a worker may go without heartbeating before its
	// claims are released to others.
	ClaimTTL time.Duration
	// MaxClaimAge bounds two things. It is how old a claim nobody renews
	// may grow, whoever holds it, before the reaper releases it to others
	// with a warning naming the group, partition and worker: a leaked
	// claim comes back. The claims of the batches a runtime's workers are
	// running are renewed on every heartbeat (on a store that is a
	// driver.ClaimRenewer: memstore, sqlitestore, pgstore), so a running batch
	// keeps its partition however long it runs, and no other worker runs
	// it again meanwhile. And it is the default batch timeout
	// (RouterOptions.BatchTimeout) of the impure reactors that declare
	// none (core.Hooks.Timeout, TimeoutProvider): past it the batch's
	// context is cancelled and, if the batch then fails, the failure (a
	// *BatchTimeoutError) goes to the group's error strategy. A reactor
	// whose batches honestly run longer (a slow workflow step, a report)
	// declares its own Timeout, or a negative one for none. Must be longer
	// than HeartbeatInterval and well above InlineBudget.
	MaxClaimAge time.Duration
	// OptimizeInterval is how often the planner statistics are refreshed.
	OptimizeInterval time.Duration
	// StopTimeout bounds how long Stop waits for running batches and ticks.
	StopTimeout time.Duration
	// Clock is where the runtime takes its time from. Default: the
	// store's clock when the store keeps one (driver.Clocked: memstore given
	// WithSharedClock, sqlitestore given Options.Clock), so a simulated
	// clock given once, to the store, drives the runtime, its router and
	// the workflows too; else SystemClock. A clock other than the store's
	// is refused (ErrClockMismatch).
	Clock Clock
	// Logger receives the runtime's logs. Default: the store's logger when
	// the store has one (a Logger method, as sqlitestore's: one setting
	// for both), else slog.Default().
	Logger *slog.Logger
	// ProcessID prefixes worker ids (default "<hostname>-<pid>").
	ProcessID string
	// ErrorStrategy is the default strategy for failed batches.
	ErrorStrategy ErrorStrategy
	// Observer hears about batches, claims, conflicts, failures and
	// scheduled promotions (see Observer); nil: nobody.
	Observer Observer
	// StateCache keeps the folded states of the pure deciders' and
	// event-sourced projectors' partitions between batches (see
	// RouterOptions.StateCache; default: a cache of the runtime's own, of
	// DefaultStateCacheSize states). Give Handle the same one
	// (HandleOptions.Cache, with Runtime.StateCache) to share the states.
	StateCache *StateCache
	// CacheStates chooses the reactors whose states are cached (default
	// CacheValueStates: those whose state type holds no reference; see
	// CachePolicy).
	CacheStates CachePolicy
}

// DefaultConfig returns the defaults: 2 workers, batches of 50, up to 32
// batches per round (a pure reactor's in one transaction of at most 20 ms),
// 10 rounds per reactor, a 5 s catch-up poll, a 5 ms wake cooldown,
// heartbeats every 30 s with a 2 min claim TTL, claims released at 10 min
// old whoever holds them, hourly statistics, a 30 s stop timeout, and no
// Clock: the store's, else the system clock (see Config.Clock).
func DefaultConfig() Config {
	return Config{
		Workers:           2,
		BatchSize:         50,
		BatchesPerHandle:  DefaultBatchesPerHandle,
		InlineBudget:      DefaultInlineBudget,
		MaxDrainRounds:    10,
		CatchUpInterval:   5 * time.Second,
		WakeCooldown:      DefaultWakeCooldown,
		HeartbeatInterval: 30 * time.Second,
		ClaimTTL:          2 * time.Minute,
		MaxClaimAge:       10 * time.Minute,
		OptimizeInterval:  time.Hour,
		StopTimeout:       30 * time.Second,
	}
}

// withDefaults returns c with every zero field but Workers set to its
// default. Defaults that depend on another setting follow it: a ClaimTTL
// left zero with a HeartbeatInterval of its own is four heartbeats.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	ints := []struct{ v, d *int }{{&c.BatchSize, &d.BatchSize}, {&c.BatchesPerHandle, &d.BatchesPerHandle}, {&c.MaxDrainRounds, &d.MaxDrainRounds}}
	for _, x := range ints {
		if *x.v == 0 {
			*x.v = *x.d
		}
	}
	if c.ClaimTTL == 0 && c.HeartbeatInterval > 0 {
		c.ClaimTTL = 4 * c.HeartbeatInterval
	}
	durs := []struct{ v, d *time.Duration }{
		{&c.InlineBudget, &d.InlineBudget}, {&c.CatchUpInterval, &d.CatchUpInterval}, {&c.HeartbeatInterval, &d.HeartbeatInterval},
		{&c.ClaimTTL, &d.ClaimTTL}, {&c.MaxClaimAge, &d.MaxClaimAge}, {&c.OptimizeInterval, &d.OptimizeInterval}, {&c.StopTimeout, &d.StopTimeout},
		{&c.WakeCooldown, &d.WakeCooldown},
	}
	for _, x := range durs {
		if *x.v == 0 {
			*x.v = *x.d
		}
	}
	return c
}

// DefaultWakeCooldown is Config.WakeCooldown's default. Under a stream
// of commands appended from one goroutine while two workers decide and
// project them (BenchmarkEndToEnd), it raised the commands handled per
// second 1.3-2.0x on SQLite (two alternated rounds of the three
// partition counts) and 1.2x at the median on PostgreSQL (0.84-1.27,
// eight pairs on a noisy machine), for 2-6 ms more at the median.
const DefaultWakeCooldown = 5 * time.Millisecond

// Environment variables read by FromEnv, and the settings they override.
const (
	EnvWorkers           = "SOURCED_WORKERS"
	EnvBatchSize         = "SOURCED_BATCH_SIZE"
	EnvBatchesPerHandle  = "SOURCED_BATCHES_PER_HANDLE"
	EnvInlineBudget      = "SOURCED_INLINE_BUDGET"
	EnvMaxDrainRounds    = "SOURCED_MAX_DRAIN_ROUNDS"
	EnvCatchUpInterval   = "SOURCED_CATCH_UP_INTERVAL"
	EnvWakeCooldown      = "SOURCED_WAKE_COOLDOWN"
	EnvHeartbeatInterval = "SOURCED_HEARTBEAT_INTERVAL"
	EnvClaimTTL          = "SOURCED_CLAIM_TTL"
	EnvMaxClaimAge       = "SOURCED_MAX_CLAIM_AGE"
	EnvOptimizeInterval  = "SOURCED_OPTIMIZE_INTERVAL"
	EnvStopTimeout       = "SOURCED_STOP_TIMEOUT"
)

// FromEnv returns c with the settings given in the environment overridden
// (getenv is os.Getenv when nil): integers for counts, Go durations
// ("5s", "2m") for intervals. A value that does not parse is an error
// naming the variable and the setting.
func (c Config) FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	ints := []struct {
		env, setting string
		dst          *int
	}{
		{EnvWorkers, "Workers", &c.Workers},
		{EnvBatchSize, "BatchSize", &c.BatchSize},
		{EnvBatchesPerHandle, "BatchesPerHandle", &c.BatchesPerHandle},
		{EnvMaxDrainRounds, "MaxDrainRounds", &c.MaxDrainRounds},
	}
	for _, s := range ints {
		if v := getenv(s.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("sourced: %s=%q (setting %s): not an integer", s.env, v, s.setting))
				continue
			}
			*s.dst = n
		}
	}
	durs := []struct {
		env, setting string
		dst          *time.Duration
	}{
		{EnvInlineBudget, "InlineBudget", &c.InlineBudget},
		{EnvCatchUpInterval, "CatchUpInterval", &c.CatchUpInterval},
		{EnvWakeCooldown, "WakeCooldown", &c.WakeCooldown},
		{EnvHeartbeatInterval, "HeartbeatInterval", &c.HeartbeatInterval},
		{EnvClaimTTL, "ClaimTTL", &c.ClaimTTL},
		{EnvMaxClaimAge, "MaxClaimAge", &c.MaxClaimAge},
		{EnvOptimizeInterval, "OptimizeInterval", &c.OptimizeInterval},
		{EnvStopTimeout, "StopTimeout", &c.StopTimeout},
	}
	for _, s := range durs {
		if v := getenv(s.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("sourced: %s=%q (setting %s): not a duration such as 5s or 2m", s.env, v, s.setting))
				continue
			}
			*s.dst = d
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate reports every bad setting, naming it. Zero settings are not
// bad: they mean their defaults (see Config).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(setting string, v any, want string) {
		errs = append(errs, fmt.Errorf("sourced: config %s = %v: %s", setting, v, want))
	}
	if c.Workers < 0 {
		bad("Workers", c.Workers, "must be 0 or more")
	}
	if c.BatchSize < 1 {
		bad("BatchSize", c.BatchSize, "must be at least 1 (0 for the default)")
	}
	if c.BatchesPerHandle < 1 {
		bad("BatchesPerHandle", c.BatchesPerHandle, "must be at least 1 (0 for the default)")
	}
	if c.MaxDrainRounds < 1 {
		bad("MaxDrainRounds", c.MaxDrainRounds, "must be at least 1 (0 for the default)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"InlineBudget", c.InlineBudget}, {"CatchUpInterval", c.CatchUpInterval}, {"HeartbeatInterval", c.HeartbeatInterval},
		{"ClaimTTL", c.ClaimTTL}, {"MaxClaimAge", c.MaxClaimAge}, {"OptimizeInterval", c.OptimizeInterval}, {"StopTimeout", c.StopTimeout},
	} {
		if d.v <= 0 {
			bad(d.name, d.v, "must be a positive duration (0 for the default)")
		}
	}
	if c.CacheStates < CacheValueStates || c.CacheStates > CacheNoStates {
		bad("CacheStates", c.CacheStates, "must be CacheValueStates, CacheAllStates or CacheNoStates")
	}
	if c.HeartbeatInterval > 0 && c.ClaimTTL > 0 && c.ClaimTTL <= c.HeartbeatInterval {
		bad("ClaimTTL", c.ClaimTTL, fmt.Sprintf("must be longer than HeartbeatInterval (%v), or live workers lose their claims", c.HeartbeatInterval))
	}
	if c.HeartbeatInterval > 0 && c.MaxClaimAge > 0 && c.MaxClaimAge <= c.HeartbeatInterval {
		bad("MaxClaimAge", c.MaxClaimAge, fmt.Sprintf("must be longer than HeartbeatInterval (%v): a running batch's claim is renewed once per heartbeat, and released once older than MaxClaimAge", c.HeartbeatInterval))
	}
	if c.InlineBudget > 0 && c.MaxClaimAge > 0 && c.MaxClaimAge <= c.InlineBudget {
		bad("MaxClaimAge", c.MaxClaimAge, fmt.Sprintf("must be well above InlineBudget (%v), or claims are released while their batch runs", c.InlineBudget))
	}
	return errors.Join(errs...)
}
