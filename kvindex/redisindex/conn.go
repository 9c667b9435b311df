package redisindex

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/eppkit/eppkit/kvindex"
)

// Defaults of Config.
const (
	DefaultKeyPrefix  = "eppkit:"
	DefaultTimeout    = 50 * time.Millisecond
	DefaultTTL        = time.Hour
	DefaultQueueSize  = 4096
	DefaultBatchDelay = 2 * time.Millisecond
	DefaultDownAfter  = 3
	DefaultRetryAfter = time.Second
	// DefaultMaxEntries bounds the blocks one endpoint may hold in an
	// EventIndex: 4 Mi blocks, 64 Mi tokens of 16-token blocks.
	DefaultMaxEntries = 1 << 22
	// MaxChain is the longest chain a PrefixIndex credits or looks up;
	// blocks past it are ignored (a block's depth is part of its score).
	MaxChain = 65535
)

// ErrUnavailable is returned (wrapped) by lookups not attempted because the
// backend is marked down after repeated errors.
var ErrUnavailable = errors.New("redisindex: backend marked down after repeated errors")

// Config says how to reach the server and how to keep the index there. Zero
// fields take the defaults.
type Config struct {
	// Address is the server's host:port (Redis, or Valkey, which speaks the
	// same protocol).
	Address string
	// DB is the database number.
	DB int
	// Username and Password authenticate (ACL user, or the password alone).
	Username, Password string
	// TLS, when set, is used to connect.
	TLS *tls.Config
	// PoolSize is the most connections kept per index (0: go-redis's
	// default, 10 per CPU).
	PoolSize int
	// Timeout bounds every lookup on the request path, connecting
	// included: past it the lookup fails and the request goes on without
	// prefix data. 0 means DefaultTimeout.
	Timeout time.Duration
	// WriteTimeout bounds every write (a batch of updates, off the request
	// path). 0 means Timeout, and at least a second.
	WriteTimeout time.Duration
	// KeyPrefix starts every key the index writes. Replicas of one picker
	// share it; another pool on the same server needs its own. "" means
	// DefaultKeyPrefix.
	KeyPrefix string
	// TTL is how long an endpoint's data lives without being written or
	// refreshed: the index refreshes the endpoints it writes for while they
	// are in its pool, so only the data of endpoints no replica knows ages
	// out. 0 means DefaultTTL; a negative TTL keeps data until removed.
	TTL time.Duration
	// QueueSize bounds the updates a PrefixIndex queues for writing; past
	// it new ones are dropped and counted. 0 means DefaultQueueSize.
	QueueSize int
	// BatchDelay is how long a PrefixIndex's writer waits after an update
	// for more to write with it: a longer wait merges more credits of
	// requests sharing a prefix (less work for the server) and makes them
	// visible later. 0 means DefaultBatchDelay; a negative delay writes at
	// once.
	BatchDelay time.Duration
	// MaxEntries bounds the blocks one endpoint holds in an EventIndex;
	// stores past it are refused and counted. 0 means DefaultMaxEntries.
	MaxEntries int
	// DownAfter consecutive failed calls mark the backend down for
	// RetryAfter: lookups then return no data at once, without waiting
	// for a timeout. 0 means DefaultDownAfter and DefaultRetryAfter.
	DownAfter  int
	RetryAfter time.Duration
	// Mirror keeps a copy of the index's holders and endpoint ids in this
	// replica's memory, fed by the change log the server's scripts write:
	// lookups read the copy, without a round trip, while it is current (it
	// read the log's end within MirrorStale), and the server otherwise. A
	// copy is loaded at start and again when it fell too far behind the log
	// or the server lost the index; writes go to the server as without it.
	// It costs this replica's memory about what the in-memory index would.
	Mirror bool
	// Logger receives errors (at most one line per ten seconds, with a
	// count) and recoveries; nil discards them.
	Logger *slog.Logger
}

// withDefaults checks cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Address == "" {
		return cfg, errors.New("redisindex: Address is required")
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return cfg, fmt.Errorf("redisindex: Address %q: want host:port: %w", cfg.Address, err)
	}
	if cfg.DB < 0 || cfg.PoolSize < 0 || cfg.QueueSize < 0 || cfg.MaxEntries < 0 || cfg.DownAfter < 0 ||
		cfg.Timeout < 0 || cfg.WriteTimeout < 0 || cfg.RetryAfter < 0 {
		return cfg, errors.New("redisindex: DB, PoolSize, QueueSize, MaxEntries, DownAfter and the timeouts must be ≥ 0")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = max(cfg.Timeout, time.Second)
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = DefaultKeyPrefix
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.BatchDelay == 0 {
		cfg.BatchDelay = DefaultBatchDelay
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.DownAfter == 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// ttlMillis is the TTL as a script argument: 0 for none.
func (cfg *Config) ttlMillis() int64 {
	if cfg.TTL < 0 {
		return 0
	}
	return max(1, cfg.TTL.Milliseconds())
}

// conn is what both indexes share: the client, the health of the backend
// (down after repeated failures), the counters and the rate-limited log.
type conn struct {
	cfg    Config
	client *redis.Client
	log    *slog.Logger

	fails     atomic.Int64
	downUntil atomic.Int64 // unix nanoseconds; 0: up
	lastLog   atomic.Int64 // unix nanoseconds of the last error logged
	quiet     atomic.Uint64

	lookups, writes, errs, timeouts, skipped, dropped atomic.Uint64
	mirrorLookups, mirrorLoads                        atomic.Uint64

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// logEvery bounds the error log to one line per period.
const logEvery = 10 * time.Second

func newConn(cfg Config) (*conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{
		Addr:                     cfg.Address,
		DB:                       cfg.DB,
		Username:                 cfg.Username,
		Password:                 cfg.Password,
		TLSConfig:                cfg.TLS,
		PoolSize:                 cfg.PoolSize,
		Protocol:                 2, // no HELLO: any Redis or Valkey
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// Every call carries a deadline (Timeout or WriteTimeout); the
		// socket timeouts only back it up.
		ContextTimeoutEnabled: true,
		DialTimeout:           cfg.WriteTimeout,
		ReadTimeout:           cfg.WriteTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		PoolTimeout:           cfg.Timeout,
		MaxRetries:            -1, // a retry could outlive the caller's deadline
		DialerRetries:         1,
	})
	return &conn{cfg: cfg, client: client, log: cfg.Logger, stop: make(chan struct{})}, nil
}

// up reports whether calls may go to the backend now, counting a skip when
// not.
func (c *conn) up() bool {
	until := c.downUntil.Load()
	if until == 0 || time.Now().UnixNano() >= until {
		return true
	}
	c.skipped.Add(1)
	return false
}

// done records the outcome of one call made with ctx (derived from parent):
// success resets the failure count, failures mark the backend down after
// DownAfter in a row. A call abandoned because parent ended (the client went
// away) says nothing about the backend.
func (c *conn) done(parent context.Context, what string, err error) error {
	if err == nil {
		if c.fails.Swap(0) >= int64(c.cfg.DownAfter) {
			c.log.Info("redisindex: backend is back", "address", c.cfg.Address)
		}
		c.downUntil.Store(0)
		return nil
	}
	if parent.Err() != nil {
		return fmt.Errorf("redisindex: %s: %w", what, err)
	}
	c.errs.Add(1)
	if isTimeout(err) {
		c.timeouts.Add(1)
	}
	if c.fails.Add(1) >= int64(c.cfg.DownAfter) {
		c.downUntil.Store(time.Now().Add(c.cfg.RetryAfter).UnixNano())
	}
	now := time.Now().UnixNano()
	if last := c.lastLog.Load(); now-last >= int64(logEvery) && c.lastLog.CompareAndSwap(last, now) {
		c.log.Warn("redisindex: backend call failed; requests go on without its data",
			"address", c.cfg.Address, "call", what, "error", err.Error(), "suppressed", c.quiet.Swap(0))
	} else {
		c.quiet.Add(1)
	}
	return fmt.Errorf("redisindex: %s: %w", what, err)
}

// isTimeout reports whether err is a deadline or socket timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isNoScript reports whether err says the server lost the script (a restart
// or SCRIPT FLUSH).
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// loadScripts loads every script into the server's cache.
func (c *conn) loadScripts(ctx context.Context) error {
	pipe := c.client.Pipeline()
	for _, src := range allScripts { // not Script.Load: in a pipeline it would forget the hash
		pipe.ScriptLoad(ctx, src)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// stats returns the counters.
func (c *conn) stats() kvindex.BackendStats {
	until := c.downUntil.Load()
	return kvindex.BackendStats{
		Backend:  "redis",
		Lookups:  c.lookups.Load(),
		Writes:   c.writes.Load(),
		Errors:   c.errs.Load(),
		Timeouts: c.timeouts.Load(),
		Skipped:  c.skipped.Load(),
		Dropped:  c.dropped.Load(),

		MirrorLookups: c.mirrorLookups.Load(),
		MirrorLoads:   c.mirrorLoads.Load(),
		Down:          until != 0 && time.Now().UnixNano() < until,
	}
}

// every runs f every period in the background until close.
func (c *conn) every(period time.Duration, f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// refreshPeriod is how often the TTLs of live endpoints are extended: a
// quarter of the TTL, at most a minute.
func (c *conn) refreshPeriod() time.Duration {
	if c.cfg.TTL <= 0 {
		return time.Minute // base models only
	}
	return min(time.Minute, max(10*time.Millisecond, c.cfg.TTL/4))
}

// close stops the background work and closes the client.
func (c *conn) close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		c.wg.Wait()
		err = c.client.Close()
	})
	return err
}

// appendItems appends the 8-byte items of packed to args, one argument
// each: the scripts read them in place.
func appendItems(args []any, packed string) []any {
	for i := 0; i+8 <= len(packed); i += 8 {
		args = append(args, packed[i:i+8])
	}
	return args
}

// pack writes hashes as 8-byte big-endian strings into buf.
func pack(buf []byte, hashes []uint64) []byte {
	for _, h := range hashes {
		buf = append(buf, byte(h>>56), byte(h>>48), byte(h>>40), byte(h>>32), byte(h>>24), byte(h>>16), byte(h>>8), byte(h))
	}
	return buf
}
