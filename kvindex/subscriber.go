package kvindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Subscriber modes.
const (
	// ModeConnect makes the subscriber connect to every endpoint's
	// publisher, tcp://<address>:<Port+rank>, as endpoints come and go.
	ModeConnect = "connect"
	// ModeBind makes the subscriber bind one socket that every engine's
	// publisher connects to.
	ModeBind = "bind"
)

// Defaults of SubscriberConfig.
const (
	DefaultEventsPort    = 5557
	DefaultTopicFilter   = "kv@"
	DefaultReplayTimeout = 2 * time.Second
	DefaultReconnectMin  = 100 * time.Millisecond
	DefaultReconnectMax  = 5 * time.Second
	DefaultDialTimeout   = time.Second
)

// SubscriberConfig configures a Subscriber. Zero fields take the defaults.
type SubscriberConfig struct {
	// Mode is ModeConnect (the default) or ModeBind.
	Mode string
	// BindAddress is the ZeroMQ address ModeBind listens on, e.g.
	// "tcp://*:5557" ("tcp://127.0.0.1:0" picks a free port; see Addr).
	BindAddress string
	// Port is the engines' publisher port in ModeConnect; an endpoint of
	// rank r publishes on Port+r.
	Port int
	// TopicFilter is the topic prefix subscribed to.
	TopicFilter string
	// ReplayPort is the engines' replay (ROUTER) port, rank r on
	// ReplayPort+r; 0 disables replay, and gaps are only counted.
	ReplayPort int
	// ReplayTimeout bounds one replay request.
	ReplayTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// connection attempts in ModeConnect.
	ReconnectMin, ReconnectMax time.Duration
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration
	// AcceptUnknown applies batches whose topic names no known endpoint
	// (ModeBind) under the topic's endpoint; by default they are dropped
	// and counted.
	AcceptUnknown bool
	// MaxPayload is the largest payload accepted; 0 means DefaultMaxPayload.
	MaxPayload int
	// Logger receives the subscriber's warnings; nil discards them.
	Logger *slog.Logger
}

// Sink receives the batches a Subscriber decoded, per endpoint in sequence
// order, and clears an endpoint whose engine restarted. EventIndex is one.
// It is called from the subscriber's goroutines, concurrently for different
// endpoints, and must not keep the batch after returning.
type Sink interface {
	Apply(endpoint string, b *Batch)
	ClearEndpoint(endpoint string)
}

var (
	_ Sink = (*EventIndex)(nil)
	_ Sink = SinkFunc(nil)
)

// SinkFunc adapts a function to a Sink that ignores clears.
type SinkFunc func(endpoint string, b *Batch)

// Apply calls f.
func (f SinkFunc) Apply(endpoint string, b *Batch) { f(endpoint, b) }

// ClearEndpoint does nothing.
func (f SinkFunc) ClearEndpoint(string) {}

// SubscriberEndpoint is an engine the subscriber follows.
type SubscriberEndpoint struct {
	// Name is the endpoint's name in the sink (e.g. its host:port).
	Name string
	// Address is the engine's IP address or host name; Port its serving
	// port (to match topics of the form kv@<ip>:<port>@<model>); Rank its
	// data-parallel rank, which offsets the event and replay ports.
	Address string
	Port    int
	Rank    int
}

// SubscriberStats counts what a Subscriber received.
type SubscriberStats struct {
	Messages         uint64 // messages received, replayed ones included
	Applied          uint64 // batches handed to the sink
	Malformed        uint64 // messages dropped undecoded (ErrMalformed)
	Duplicates       uint64 // batches dropped because their sequence number was already applied
	Gaps             uint64 // sequence gaps seen
	Replayed         uint64 // batches applied from replay
	ReplayFailures   uint64 // replay requests that failed or timed out
	Restarts         uint64 // sequence numbers going backwards: the endpoint was cleared
	UnknownEndpoints uint64 // batches for no known endpoint (ModeBind)
	UnknownEvents    uint64 // events of unknown types skipped
	Connects         uint64 // connections established (ModeConnect)
}

// Subscriber receives engines' KV events over ZeroMQ (SPEC §5.2), decodes
// them and hands them to a Sink per endpoint in sequence order. It tracks
// each publisher's sequence numbers: a duplicate is dropped, a gap is
// filled by replay when configured (and counted), a sequence going
// backwards means the engine restarted and its endpoint is cleared first.
//
// In ModeConnect one goroutine per endpoint connects (reconnecting with
// exponential backoff) and reads; in ModeBind one goroutine reads the bound
// socket. Close stops them all and waits. AddEndpoint, RemoveEndpoint and
// Stats are safe for concurrent use and do not block.
type Subscriber struct {
	cfg  SubscriberConfig
	sink Sink
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards eps; sink calls hold it for reading, so that once
	// RemoveEndpoint returns the sink hears nothing more of the endpoint.
	mu    sync.RWMutex
	eps   map[string]*subEndpoint // by name
	bound zmq4.Socket             // ModeBind
	addr  string

	st struct {
		messages, applied, malformed, duplicates, gaps, replayed, replayFailures,
		restarts, unknownEndpoints, unknownEvents, connects atomic.Uint64
	}
}

type subEndpoint struct {
	SubscriberEndpoint
	cancel context.CancelFunc // ModeConnect
}

// NewSubscriber returns a subscriber feeding sink. In ModeBind it binds its
// socket and starts reading at once; in ModeConnect it connects to endpoints
// as AddEndpoint names them.
func NewSubscriber(cfg SubscriberConfig, sink Sink) (*Subscriber, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeConnect
	}
	if cfg.Mode != ModeConnect && cfg.Mode != ModeBind {
		return nil, fmt.Errorf("kvindex: subscriber mode %q: want %s or %s", cfg.Mode, ModeConnect, ModeBind)
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultEventsPort
	}
	if cfg.TopicFilter == "" {
		cfg.TopicFilter = DefaultTopicFilter
	}
	if cfg.ReplayTimeout <= 0 {
		cfg.ReplayTimeout = DefaultReplayTimeout
	}
	if cfg.ReconnectMin <= 0 {
		cfg.ReconnectMin = DefaultReconnectMin
	}
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = max(cfg.ReconnectMin, DefaultReconnectMax)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Subscriber{cfg: cfg, sink: sink, log: cfg.Logger, eps: map[string]*subEndpoint{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.Mode == ModeBind {
		if cfg.BindAddress == "" {
			s.cancel()
			return nil, errors.New("kvindex: subscriber in bind mode needs a BindAddress")
		}
		sock := s.newSocket(s.ctx, zmq4.NewSub)
		if err := sock.SetOption(zmq4.OptionSubscribe, cfg.TopicFilter); err != nil {
			s.cancel()
			return nil, fmt.Errorf("kvindex: subscribe: %w", err)
		}
		if err := sock.Listen(cfg.BindAddress); err != nil {
			s.cancel()
			sock.Close()
			return nil, fmt.Errorf("kvindex: bind %s: %w", cfg.BindAddress, err)
		}
		s.bound, s.addr = sock, cfg.BindAddress
		if a := sock.Addr(); a != nil {
			s.addr = "tcp://" + a.String()
		}
		s.wg.Add(1)
		go s.readBound(sock)
	}
	return s, nil
}

// Addr returns the bound address in ModeBind (with the port the system
// chose for port 0), "" in ModeConnect.
func (s *Subscriber) Addr() string { return s.addr }

var discardLogger = log.New(io.Discard, "", 0)

func (s *Subscriber) newSocket(ctx context.Context, f func(context.Context, ...zmq4.Option) zmq4.Socket) zmq4.Socket {
	return f(ctx, zmq4.WithLogger(discardLogger), zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(s.cfg.DialTimeout))
}

// AddEndpoint follows an endpoint: in ModeConnect it starts connecting to
// its publisher; in ModeBind it lets topics name it. Adding a known name
// again replaces it.
func (s *Subscriber) AddEndpoint(ep SubscriberEndpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	if old, ok := s.eps[ep.Name]; ok {
		if old.SubscriberEndpoint == ep {
			return
		}
		s.stop(old)
	}
	e := &subEndpoint{SubscriberEndpoint: ep}
	s.eps[ep.Name] = e
	if s.cfg.Mode == ModeConnect {
		ctx, cancel := context.WithCancel(s.ctx)
		e.cancel = cancel
		s.wg.Add(1)
		go s.runConn(ctx, e)
	}
}

// RemoveEndpoint stops following the named endpoint: once it returns, the
// sink receives nothing more for it. It does not clear the sink: the caller
// owns that decision.
func (s *Subscriber) RemoveEndpoint(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.eps[name]; ok {
		s.stop(e)
		delete(s.eps, name)
	}
}

func (s *Subscriber) stop(e *subEndpoint) {
	if e.cancel != nil {
		e.cancel()
	}
}

// Close stops every goroutine of the subscriber and waits for them.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.cancel()
	s.mu.Unlock()
	if s.bound != nil {
		closeSocket(s.bound)
	}
	s.wg.Wait()
	return nil
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats {
	return SubscriberStats{
		Messages: s.st.messages.Load(), Applied: s.st.applied.Load(), Malformed: s.st.malformed.Load(),
		Duplicates: s.st.duplicates.Load(), Gaps: s.st.gaps.Load(), Replayed: s.st.replayed.Load(),
		ReplayFailures: s.st.replayFailures.Load(), Restarts: s.st.restarts.Load(),
		UnknownEndpoints: s.st.unknownEndpoints.Load(), UnknownEvents: s.st.unknownEvents.Load(),
		Connects: s.st.connects.Load(),
	}
}

// closeSocket closes sock and drains what its connections had queued, so
// zmq4's per-connection readers, blocked handing over a message, can see
// the socket is closed and exit.
func closeSocket(sock zmq4.Socket) {
	sock.Close()
	for range 128 {
		if _, err := sock.Recv(); err != nil {
			// Recv picks at random between a queued message and the
			// closed context; keep going a while to drain the queue.
			continue
		}
	}
}

// stream is the receiving state of one publisher: its decoders and its
// sequence numbers.
type stream struct {
	dec, replayDec Decoder
	started        bool
	reconnected    bool         // no message yet on a new connection to a known publisher
	owner          *subEndpoint // the registration a connect-mode stream serves
	next           uint64       // every sequence number below was applied (or lost)
	liveLast       uint64       // the highest received live (not replayed)
}

func (s *Subscriber) newStream() *stream {
	st := &stream{}
	st.dec.MaxPayload, st.replayDec.MaxPayload = s.cfg.MaxPayload, s.cfg.MaxPayload
	return st
}

// runConn follows one endpoint in ModeConnect until ctx ends.
func (s *Subscriber) runConn(ctx context.Context, e *subEndpoint) {
	defer s.wg.Done()
	ep := e.SubscriberEndpoint
	addr := "tcp://" + net.JoinHostPort(ep.Address, strconv.Itoa(s.cfg.Port+ep.Rank))
	replay := s.replayAddr(ep.Address, ep.Rank)
	st := s.newStream()
	st.owner = e
	backoff := s.cfg.ReconnectMin
	for ctx.Err() == nil {
		sock := s.newSocket(ctx, zmq4.NewSub)
		err := sock.SetOption(zmq4.OptionSubscribe, s.cfg.TopicFilter)
		if err == nil {
			err = sock.Dial(addr)
		}
		if err != nil {
			closeSocket(sock)
			s.log.Debug("KV events: cannot connect", "endpoint", ep.Name, "address", addr, "error", err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, s.cfg.ReconnectMax)
			continue
		}
		s.st.connects.Add(1)
		st.reconnected = st.started
		backoff = s.cfg.ReconnectMin
		for {
			msg, err := sock.Recv()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Debug("KV events: connection lost", "endpoint", ep.Name, "error", err)
				}
				break
			}
			s.receive(ctx, st, ep.Name, replay, msg.Frames)
		}
		closeSocket(sock)
		if !sleep(ctx, backoff) {
			return
		}
	}
}

// readBound reads the bound socket of ModeBind until Close. Decoders are
// kept per topic, sequence numbers per topic and data-parallel rank (each
// rank publishes its own sequence).
func (s *Subscriber) readBound(sock zmq4.Socket) {
	defer s.wg.Done()
	topics := map[string]*stream{}
	seqs := map[string]*stream{}
	for {
		msg, err := sock.Recv()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			continue // one publisher's connection failed; others go on
		}
		s.st.messages.Add(1)
		if len(msg.Frames) != 3 {
			s.st.malformed.Add(1)
			continue
		}
		key := string(msg.Frames[0])
		tp := topics[key]
		if tp == nil {
			if len(topics) >= 4096 { // bound what garbage topics can cost
				clear(topics)
				clear(seqs)
			}
			tp = s.newStream()
			topics[key] = tp
		}
		b, err := tp.dec.DecodeFrames(msg.Frames)
		if err != nil {
			s.st.malformed.Add(1)
			s.log.Debug("KV events: malformed message dropped", "topic", key, "error", err)
			continue
		}
		name, addr, ok := s.resolve(b)
		if !ok {
			continue
		}
		sk := key
		if b.DataParallelRank != 0 {
			sk += "\x00" + strconv.FormatInt(b.DataParallelRank, 10)
		}
		st := seqs[sk]
		if st == nil {
			st = &stream{}
			seqs[sk] = st
		}
		s.track(s.ctx, st, &tp.replayDec, name, s.replayAddr(addr, int(b.DataParallelRank)), b)
	}
}

// resolve finds the endpoint a bound-mode batch is from: by name, by
// address:port, or by address and data-parallel rank.
func (s *Subscriber) resolve(b *Batch) (name, address string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	te := b.Endpoint
	if e, ok := s.eps[te]; ok {
		return e.Name, e.Address, true
	}
	for _, e := range s.eps {
		if e.Port != 0 && net.JoinHostPort(e.Address, strconv.Itoa(e.Port)) == te {
			return e.Name, e.Address, true
		}
	}
	for _, e := range s.eps {
		if e.Address == te && int64(e.Rank) == b.DataParallelRank {
			return e.Name, e.Address, true
		}
	}
	if s.cfg.AcceptUnknown && te != "" {
		host := te
		if h, _, err := net.SplitHostPort(te); err == nil {
			host = h
		}
		return te, host, true
	}
	s.st.unknownEndpoints.Add(1)
	return "", "", false
}

func (s *Subscriber) replayAddr(address string, rank int) string {
	if s.cfg.ReplayPort == 0 || address == "" {
		return ""
	}
	return "tcp://" + net.JoinHostPort(strings.Trim(address, "[]"), strconv.Itoa(s.cfg.ReplayPort+rank))
}

// receive decodes and tracks one live message of a connect-mode stream.
func (s *Subscriber) receive(ctx context.Context, st *stream, name, replay string, frames [][]byte) {
	s.st.messages.Add(1)
	b, err := st.dec.DecodeFrames(frames)
	if err != nil {
		s.st.malformed.Add(1)
		s.log.Debug("KV events: malformed message dropped", "endpoint", name, "error", err)
		return
	}
	s.track(ctx, st, &st.replayDec, name, replay, b)
}

// track applies a live batch in sequence order: duplicates are dropped,
// gaps filled by replay (when configured), and a sequence going backwards
// clears the endpoint first, as does an old number on a new connection. The
// first batch of a stream starts it, whatever its number.
func (s *Subscriber) track(ctx context.Context, st *stream, rdec *Decoder, name, replay string, b *Batch) {
	seq := b.Seq
	reconnected := st.reconnected
	st.reconnected = false
	switch {
	case !st.started:
		st.started = true
	case seq < st.liveLast || (reconnected && seq < st.next):
		// A publisher never resends a batch live: on a new connection an old
		// number means it restarted too.
		s.st.restarts.Add(1)
		s.log.Info("KV events: sequence went backwards, the engine restarted; clearing its blocks",
			"endpoint", name, "seq", seq, "last", st.liveLast)
		s.toSink(st, name, func() { s.sink.ClearEndpoint(name) })
		st.next = 0
		if seq > 0 {
			s.st.gaps.Add(1)
			s.fill(ctx, st, rdec, name, replay, b.Topic)
		}
	case seq < st.next:
		s.st.duplicates.Add(1)
		return
	case seq > st.next:
		s.st.gaps.Add(1)
		s.fill(ctx, st, rdec, name, replay, b.Topic)
	}
	st.liveLast = seq
	if seq < st.next { // the replay delivered it already
		s.st.duplicates.Add(1)
		return
	}
	st.next = seq + 1
	s.apply(st, name, b)
}

func (s *Subscriber) apply(st *stream, name string, b *Batch) {
	if b.Unknown > 0 {
		s.st.unknownEvents.Add(uint64(b.Unknown))
	}
	if s.toSink(st, name, func() { s.sink.Apply(name, b) }) {
		s.st.applied.Add(1)
	}
}

// toSink calls f if the stream's endpoint is still followed, holding the
// registrations for reading so that RemoveEndpoint waits for it.
func (s *Subscriber) toSink(st *stream, name string, f func()) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.eps[name]
	if st.owner != nil && e != st.owner { // removed, or replaced by a newer connection
		return false
	}
	if st.owner == nil && !ok && !s.cfg.AcceptUnknown {
		return false
	}
	f()
	return true
}

// fill asks the publisher's replay socket for the batches from st.next on
// (vLLM's protocol: a DEALER sends ["", start]; the ROUTER answers
// [seq, payload] or [topic, seq, payload] per batch, after an empty
// delimiter, then seq −1) and applies them in order. Replies without a
// topic take the live stream's. It may deliver batches
// beyond the live one; the live stream's copies are then duplicates.
func (s *Subscriber) fill(ctx context.Context, st *stream, dec *Decoder, name, replay, liveTopic string) {
	if replay == "" {
		return
	}
	from := st.next
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReplayTimeout)
	defer cancel()
	sock := s.newSocket(ctx, zmq4.NewDealer)
	defer closeSocket(sock)
	err := sock.Dial(replay)
	if err == nil {
		err = sock.Send(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, from)))
	}
	for err == nil {
		var msg zmq4.Msg
		if msg, err = sock.Recv(); err != nil {
			break
		}
		frames := msg.Frames
		if len(frames) > 0 && len(frames[0]) == 0 {
			frames = frames[1:] // the delimiter of a ROUTER's reply
		}
		topic := liveTopic
		switch len(frames) {
		case 2: // [seq, payload]: the live stream's topic
		case 3: // [topic, seq, payload]
			topic, frames = string(frames[0]), frames[1:]
		default:
			err = fmt.Errorf("replay reply of %d frames", len(msg.Frames))
			continue
		}
		if len(frames[0]) != 8 {
			err = fmt.Errorf("replay sequence frame of %d bytes", len(frames[0]))
			continue
		}
		rseq := binary.BigEndian.Uint64(frames[0])
		if int64(rseq) == -1 {
			return // end of replay
		}
		s.st.messages.Add(1)
		if rseq < st.next {
			continue
		}
		b, derr := dec.Decode(topic, rseq, frames[1])
		if derr != nil {
			s.st.malformed.Add(1)
			continue
		}
		st.next = rseq + 1
		s.apply(st, name, b)
		s.st.replayed.Add(1)
	}
	s.st.replayFailures.Add(1)
	s.log.Warn("KV events: replay failed; the gap stays unfilled", "endpoint", name, "replay", replay,
		"from", from, "error", err)
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
