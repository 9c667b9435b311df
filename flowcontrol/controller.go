package flowcontrol

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// Defaults and special values of Config.
const (
	// DefaultRequestTTL is how long an item may wait when Config.RequestTTL
	// is zero.
	DefaultRequestTTL = 60 * time.Second
	// NoTTL disables expiry (the YAML's "0s"): items wait until dispatched,
	// cancelled or drained.
	NoTTL time.Duration = -1
	// DefaultBandMaxRequests and DefaultBandMaxBytes are a band's limits when
	// its BandConfig leaves them zero (llm-d-router's defaults).
	DefaultBandMaxRequests int64 = 5000
	DefaultBandMaxBytes    int64 = 1_000_000_000
	// Unlimited as a band limit means no limit.
	Unlimited int64 = math.MaxInt64
	// DefaultFlowIdleTimeout is how long an empty flow is kept before it is
	// collected.
	DefaultFlowIdleTimeout = 5 * time.Minute
	// DefaultRecheck is how often a dispatcher that cannot dispatch re-reads
	// the saturation when nothing wakes it.
	DefaultRecheck = 25 * time.Millisecond
	// maxIdleFlows bounds the empty flows kept for reuse: beyond it the
	// longest idle is collected at once, so a stream of one-off fairness ids
	// cannot grow memory until the idle timeout.
	maxIdleFlows = 1 << 14
)

// Config configures a Controller. The zero value is usable: every priority
// gets a band with the default limits, FCFS ordering and global-strict
// fairness; there are no global limits; items expire after 60s; nothing is
// ever saturated.
type Config struct {
	// MaxRequests and MaxBytes limit the items queued in all bands together;
	// zero means no global limit.
	MaxRequests int64
	MaxBytes    int64
	// RequestTTL is how long an item may wait while the pool has endpoints:
	// zero means DefaultRequestTTL, NoTTL (any negative value) no expiry.
	RequestTTL time.Duration
	// NoEndpointTTL is how long an item may wait while the pool has no
	// endpoints (Endpoints returns none): zero means RequestTTL, NoTTL no
	// expiry. When the pool empties or fills up again, waiting items are
	// charged from that moment.
	NoEndpointTTL time.Duration
	// Bands configures explicit priority bands.
	Bands []BandConfig
	// DefaultBand is the template of the band provisioned for a priority
	// with no explicit band (its Priority is ignored); nil means the
	// defaults. NegativeBand is the template for negative priorities; nil
	// means DefaultBand.
	DefaultBand  *BandConfig
	NegativeBand *BandConfig
	// UsageLimit sets the bands' saturation ceilings; nil means a static
	// ceiling of 1.
	UsageLimit UsageLimitPolicy
	// Saturation reports the pool's saturation; nil means never saturated.
	Saturation SaturationDetector
	// Endpoints returns the pool's endpoints, for Saturation and the
	// no-endpoint TTL; nil means none are known and the pool never counts
	// as empty.
	Endpoints func() []*datalayer.Endpoint
	// Clock tells the time; nil means the wall clock.
	Clock plugins.Clock
	// Logger receives the controller's debug events; nil discards.
	Logger *slog.Logger
	// FlowIdleTimeout is how long an empty flow is kept; zero means
	// DefaultFlowIdleTimeout.
	FlowIdleTimeout time.Duration
	// Recheck is how often the dispatcher, when it holds items it cannot
	// dispatch, re-reads the saturation without being notified; zero means
	// DefaultRecheck.
	Recheck time.Duration
}

// BandConfig configures one priority band (or a band template).
type BandConfig struct {
	Priority int
	// MaxRequests and MaxBytes limit the items queued in the band; zero
	// means DefaultBandMaxRequests and DefaultBandMaxBytes, Unlimited none.
	MaxRequests int64
	MaxBytes    int64
	// Fairness picks the band's next flow; nil means GlobalStrict.
	Fairness FairnessPolicy
	// Ordering orders the band's items; nil means FCFS.
	Ordering OrderingPolicy
}

// Controller queues requests per flow inside priority bands and dispatches
// them as the pool has room (see the package documentation). Build it with
// New; Start runs the dispatcher in the background, or the caller drives it
// with Dispatch (tests, simulators). A Controller is safe for concurrent use.
type Controller struct {
	ttl, noEpTTL time.Duration // 0: none
	idleTimeout  time.Duration
	recheck      time.Duration
	maxRequests  int64
	maxBytes     int64
	defaultBand  BandConfig
	negativeBand BandConfig
	usage        UsageLimitPolicy
	saturation   SaturationDetector
	endpoints    func() []*datalayer.Endpoint
	clock        plugins.Clock
	log          *slog.Logger

	mu             sync.Mutex
	bands          []*Band // by priority, highest first
	byPrio         map[int]*Band
	prios          []int
	ceilings       []float64
	seq            uint64
	len            int
	bytes          int64
	head, tail     *Item // queued items in enqueue order
	idleHead       *Flow // empty flows, longest idle first
	idleTail       *Flow
	idleCount      int
	flowCount      int
	sweepBands     bool // a dynamic band may have become collectable
	empty          bool // the pool had no endpoints at the last pass
	regimeStart    int64
	lastSaturation float64 // the saturation last read
	blocked        bool    // the last pass stopped at a band's ceiling
	blockedPrio    int
	closed         bool
	started        bool

	wake     chan struct{}
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	loopDone chan struct{}
}

// New validates cfg and returns a Controller. It starts nothing.
func New(cfg Config) (*Controller, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if cfg.MaxRequests < 0 {
		bad("MaxRequests", "must not be negative (got %d)", cfg.MaxRequests)
	}
	if cfg.MaxBytes < 0 {
		bad("MaxBytes", "must not be negative (got %d)", cfg.MaxBytes)
	}
	if cfg.FlowIdleTimeout < 0 {
		bad("FlowIdleTimeout", "must not be negative (got %v)", cfg.FlowIdleTimeout)
	}
	if cfg.Recheck < 0 {
		bad("Recheck", "must not be negative (got %v)", cfg.Recheck)
	}
	checkBand := func(field string, b *BandConfig) {
		if b.MaxRequests < 0 {
			bad(field+".MaxRequests", "must not be negative (got %d)", b.MaxRequests)
		}
		if b.MaxBytes < 0 {
			bad(field+".MaxBytes", "must not be negative (got %d)", b.MaxBytes)
		}
	}
	seen := map[int]int{}
	for i := range cfg.Bands {
		field := fmt.Sprintf("Bands[%d]", i)
		if first, dup := seen[cfg.Bands[i].Priority]; dup {
			bad(field+".Priority", "duplicate priority %d (also Bands[%d])", cfg.Bands[i].Priority, first)
		}
		seen[cfg.Bands[i].Priority] = i
		checkBand(field, &cfg.Bands[i])
	}
	if cfg.DefaultBand != nil {
		checkBand("DefaultBand", cfg.DefaultBand)
	}
	if cfg.NegativeBand != nil {
		checkBand("NegativeBand", cfg.NegativeBand)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("flowcontrol: %w", err)
	}

	c := &Controller{
		ttl:         ttlOf(cfg.RequestTTL, DefaultRequestTTL),
		idleTimeout: cmp.Or(cfg.FlowIdleTimeout, DefaultFlowIdleTimeout),
		recheck:     cmp.Or(cfg.Recheck, DefaultRecheck),
		maxRequests: cfg.MaxRequests,
		maxBytes:    cfg.MaxBytes,
		usage:       cfg.UsageLimit,
		saturation:  cfg.Saturation,
		endpoints:   cfg.Endpoints,
		clock:       cfg.Clock,
		log:         cfg.Logger,
		byPrio:      map[int]*Band{},
		wake:        make(chan struct{}, 1),
		loopDone:    make(chan struct{}),
	}
	c.noEpTTL = c.ttl
	if cfg.NoEndpointTTL != 0 {
		c.noEpTTL = ttlOf(cfg.NoEndpointTTL, 0)
	}
	if c.usage == nil {
		c.usage = &StaticUsageLimit{Threshold: 1}
	}
	if c.clock == nil {
		c.clock = plugins.SystemClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultBand != nil {
		c.defaultBand = *cfg.DefaultBand
	}
	c.negativeBand = c.defaultBand
	if cfg.NegativeBand != nil {
		c.negativeBand = *cfg.NegativeBand
	}
	for _, bc := range cfg.Bands {
		c.addBand(newBand(bc, false))
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

func ttlOf(d, zero time.Duration) time.Duration {
	switch {
	case d == 0:
		return zero
	case d < 0:
		return 0
	}
	return d
}

func newBand(bc BandConfig, dynamic bool) *Band {
	b := &Band{
		priority:    bc.Priority,
		maxRequests: cmp.Or(bc.MaxRequests, DefaultBandMaxRequests),
		maxBytes:    cmp.Or(bc.MaxBytes, DefaultBandMaxBytes),
		fairness:    bc.Fairness,
		ordering:    bc.Ordering,
		dynamic:     dynamic,
		flows:       map[string]*Flow{},
	}
	if b.fairness == nil {
		b.fairness = &GlobalStrict{}
	}
	if b.ordering == nil {
		b.ordering = &FCFS{}
	}
	b.keyer, _ = b.ordering.(Keyer)
	return b
}

// addBand inserts b in priority order.
func (c *Controller) addBand(b *Band) {
	i, _ := slices.BinarySearchFunc(c.bands, b.priority, func(x *Band, p int) int { return cmp.Compare(p, x.priority) })
	c.bands = slices.Insert(c.bands, i, b)
	c.byPrio[b.priority] = b
	c.prios = append(c.prios, 0)
	c.ceilings = append(c.ceilings, 0)
	for i, b := range c.bands {
		c.prios[i] = b.priority
	}
}

func (c *Controller) removeBand(b *Band) {
	i := slices.Index(c.bands, b)
	c.bands = slices.Delete(c.bands, i, i+1)
	delete(c.byPrio, b.priority)
	c.prios = slices.Delete(c.prios, i, i+1)
	c.ceilings = c.ceilings[:len(c.bands)]
	c.log.Debug("flow control: collected idle priority band", "priority", b.priority)
}

// band returns the band of priority p, provisioning it from its template.
func (c *Controller) band(p int) *Band {
	if b := c.byPrio[p]; b != nil {
		return b
	}
	tmpl := c.defaultBand
	if p < 0 {
		tmpl = c.negativeBand
	}
	tmpl.Priority = p
	b := newBand(tmpl, true)
	c.addBand(b)
	c.sweepBands = true
	c.log.Debug("flow control: provisioned priority band", "priority", p,
		"maxRequests", b.maxRequests, "maxBytes", b.maxBytes)
	return b
}

func (c *Controller) now() int64 { return c.clock.Now().UnixNano() }

// Close shuts the controller down: every waiting item is drained
// (ErrShuttingDown), later enqueues are refused, and the dispatcher stops.
// It is safe to call more than once.
func (c *Controller) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	now := c.now()
	n := c.len
	for it := c.head; it != nil; it = c.head {
		b := it.flow.band
		c.remove(it, now)
		c.finish(b, it, Drained, now)
	}
	started := c.started
	c.mu.Unlock()
	c.cancel()
	if started {
		<-c.loopDone
	}
	if n > 0 {
		c.log.Info("flow control: shut down; drained the waiting requests", "drained", n)
	}
	return nil
}
