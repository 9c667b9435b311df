package kvindex

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// testEngine is a fake engine's KV-event publisher: a PUB socket and, like
// vLLM's ZmqEventPublisher, a ROUTER answering replay requests from a
// buffer of every batch it published.
type testEngine struct {
	t      *testing.T
	topic  string
	pub    zmq4.Socket
	router zmq4.Socket
	mu     sync.Mutex
	sent   map[uint64][]byte
	done   chan struct{}
	// threeFrames answers replays as [topic, seq, payload] (newer layout).
	threeFrames bool
}

// newTestEngine starts a publisher that listens (connect mode) on a free
// port of 127.0.0.1, or dials the subscriber's bound address.
func newTestEngine(t *testing.T, topic, dial string) *testEngine {
	t.Helper()
	ctx := context.Background()
	e := &testEngine{t: t, topic: topic, sent: map[uint64][]byte{}, done: make(chan struct{}),
		pub: zmq4.NewPub(ctx, zmq4.WithLogger(discardLogger)), router: zmq4.NewRouter(ctx, zmq4.WithLogger(discardLogger))}
	if dial != "" {
		if err := e.pub.Dial(dial); err != nil {
			t.Fatal(err)
		}
	} else if err := e.pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := e.router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go e.serveReplay()
	t.Cleanup(e.close)
	return e
}

func port(t *testing.T, s zmq4.Socket) int {
	_, p, err := net.SplitHostPort(s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func (e *testEngine) close() {
	select {
	case <-e.done:
		return
	default:
	}
	closeSocket(e.pub)
	closeSocket(e.router)
	<-e.done
}

func (e *testEngine) serveReplay() {
	defer close(e.done)
	for {
		msg, err := e.router.Recv()
		if err != nil {
			if msg.Frames == nil {
				return // closed
			}
			continue
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		e.mu.Lock()
		var seqs []uint64
		for s := range e.sent {
			if s >= start {
				seqs = append(seqs, s)
			}
		}
		slices.Sort(seqs)
		for _, s := range seqs {
			frames := [][]byte{id, nil, binary.BigEndian.AppendUint64(nil, s), e.sent[s]}
			if e.threeFrames {
				frames = [][]byte{id, nil, []byte(e.topic), binary.BigEndian.AppendUint64(nil, s), e.sent[s]}
			}
			e.router.Send(zmq4.NewMsgFrom(frames...)) //nolint:errcheck // test
		}
		e.mu.Unlock()
		e.router.Send(zmq4.NewMsgFrom(id, nil, binary.BigEndian.AppendUint64(nil, ^uint64(0)), nil)) //nolint:errcheck // test
	}
}

// record keeps a batch for replay without publishing it (a lost message).
func (e *testEngine) record(seq uint64, payload []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sent[seq] = payload
}

// publish records and sends a batch.
func (e *testEngine) publish(seq uint64, payload []byte) {
	e.record(seq, payload)
	if err := e.pub.Send(zmq4.NewMsgFrom([]byte(e.topic), binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

// restart forgets the replay buffer, as a restarted engine does.
func (e *testEngine) restart() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.sent)
}

// storePayload is a batch storing blocks [from, to) of toks from engine eng.
func storePayload(t testing.TB, eng engine, toks []uint32, from, to int) []byte {
	ev := eng.stored(toks, from, to, "GPU")
	var parent any
	if ev.HasParent {
		parent = ev.ParentHash
	}
	return pack(t, []any{1.0, []any{[]any{"BlockStored", ev.BlockHashes, parent, ev.TokenIDs, 16, nil, "GPU", nil}}, 0})
}

// eventually polls cond every 5ms for at most 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countingSink wraps an index and counts clears.
type countingSink struct {
	*EventIndex
	mu     sync.Mutex
	clears int
}

func (c *countingSink) ClearEndpoint(ep string) {
	c.mu.Lock()
	c.clears++
	c.mu.Unlock()
	c.EventIndex.ClearEndpoint(ep)
}

func (c *countingSink) clearCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clears
}

// noLeaks fails the test if goroutines started during it are still running
// shortly after it ends. zmq4's PUB sockets leave one goroutine behind when
// closed (its writer; v0.17.0): the test's fake engines use them, the
// subscriber does not, so those are not counted.
func noLeaks(t *testing.T) {
	before, _ := goroutines()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n, stacks := goroutines()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines before, %d after:\n%s", before, n, stacks)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// goroutines counts the running goroutines, except zmq4's PUB writers.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.TrimSpace(g) != "" && !strings.Contains(g, "zmq4.(*pubMWriter).run") {
			n++
		}
	}
	return n, stacks
}

// runScenario drives an engine through warm-up, a lost message filled by
// replay, malformed messages and a restart, checking the index after each
// step. publish sends a batch to the subscriber; want is the endpoint name.
func runScenario(t *testing.T, e *testEngine, sub *Subscriber, sink *countingSink, ep string) {
	eng := engine{seed: 5, bt: 16}
	toks := tokens(77, 16*8)
	keys := sink.BlockKeys(nil, "m", "", toks, 0)
	held := func() float64 { return matchOf(sink.EventIndex, keys, ep)[0] }

	// Warm-up: PUB/SUB drops messages until the subscription arrives, so
	// repeat batch 0; the copies that do arrive are duplicates.
	p0 := storePayload(t, eng, toks, 0, 2)
	eventually(t, "the first batch", func() bool { e.publish(0, p0); return held() == 2 })

	e.publish(1, storePayload(t, eng, toks, 2, 4))
	eventually(t, "batch 1", func() bool { return held() == 4 })

	// Batch 2 is lost; batch 3 reveals the gap, which replay fills.
	e.record(2, storePayload(t, eng, toks, 4, 6))
	e.publish(3, storePayload(t, eng, toks, 6, 8))
	eventually(t, "the gap filled by replay", func() bool { return held() == 8 })
	st := sub.Stats()
	if st.Gaps != 1 || st.Replayed < 1 || st.ReplayFailures != 0 {
		t.Fatalf("after the gap: %+v", st)
	}

	// Garbage on the wire is dropped and counted; the stream goes on.
	e.pub.Send(zmq4.NewMsgFrom([]byte(e.topic), binary.BigEndian.AppendUint64(nil, 4), []byte("garbage"))) //nolint:errcheck // test
	e.pub.Send(zmq4.NewMsgFrom([]byte(e.topic), []byte{1, 2, 3}, p0))                                      //nolint:errcheck // test
	e.pub.Send(zmq4.NewMsgFrom([]byte(e.topic), binary.BigEndian.AppendUint64(nil, 4)))                    //nolint:errcheck // test
	eventually(t, "malformed messages counted", func() bool { return sub.Stats().Malformed >= 3 })

	// The engine restarts: its sequence starts over at 0 with other blocks.
	e.restart()
	other := tokens(78, 16*2)
	otherKeys := sink.BlockKeys(nil, "m", "", other, 0)
	e.publish(0, storePayload(t, engine{seed: 6, bt: 16}, other, 0, 2))
	eventually(t, "the restart", func() bool { return matchOf(sink.EventIndex, otherKeys, ep)[0] == 2 })
	if held() != 0 || sink.clearCount() != 1 || sub.Stats().Restarts != 1 {
		t.Fatalf("after the restart: held %v, clears %d, %+v", held(), sink.clearCount(), sub.Stats())
	}
	if st := sink.Stats(); st.UnknownParents != 0 || st.Malformed != 0 {
		t.Fatalf("index stats %+v", st)
	}
}

func TestSubscriberConnectMode(t *testing.T) {
	noLeaks(t)
	e := newTestEngine(t, "kv@127.0.0.1@m", "")
	sink := &countingSink{EventIndex: newIndex(t, EventIndexConfig{})}
	sub, err := NewSubscriber(SubscriberConfig{Port: port(t, e.pub), ReplayPort: port(t, e.router),
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const ep = "127.0.0.1:8000"
	sub.AddEndpoint(SubscriberEndpoint{Name: ep, Address: "127.0.0.1", Port: 8000})
	runScenario(t, e, sub, sink, ep)

	// The engine's publisher goes away and comes back on the same port: the
	// subscriber reconnects.
	p := port(t, e.pub)
	e.close()
	e2 := &testEngine{t: t, topic: e.topic, sent: map[uint64][]byte{}, done: make(chan struct{}),
		pub: zmq4.NewPub(context.Background(), zmq4.WithLogger(discardLogger)), router: zmq4.NewRouter(context.Background(), zmq4.WithLogger(discardLogger))}
	eventually(t, "the port to be free again", func() bool { return e2.pub.Listen(fmt.Sprintf("tcp://127.0.0.1:%d", p)) == nil })
	if err := e2.router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go e2.serveReplay()
	t.Cleanup(e2.close)
	toks := tokens(79, 16)
	keys := sink.BlockKeys(nil, "m", "", toks, 0)
	pl := storePayload(t, engine{seed: 7, bt: 16}, toks, 0, 1)
	eventually(t, "the reconnection", func() bool {
		e2.publish(0, pl)
		return matchOf(sink.EventIndex, keys, ep)[0] == 1
	})
	if sub.Stats().Connects < 2 {
		t.Fatalf("stats %+v", sub.Stats())
	}

	// Removing the endpoint stops its connection.
	sub.RemoveEndpoint(ep)
	sub.AddEndpoint(SubscriberEndpoint{Name: "127.0.0.2:8000", Address: "127.0.0.2", Port: 8000}) // nobody there
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSubscriberBindMode(t *testing.T) {
	noLeaks(t)
	sink := &countingSink{EventIndex: newIndex(t, EventIndexConfig{})}
	// The replay port must be known before the engine starts: take a free
	// one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	replayPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	sub, err := NewSubscriber(SubscriberConfig{Mode: ModeBind, BindAddress: "tcp://127.0.0.1:0", ReplayPort: replayPort}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Addr() == "" || sub.Addr() == "tcp://127.0.0.1:0" {
		t.Fatalf("bound address %q", sub.Addr())
	}
	const ep = "127.0.0.1:8000"
	sub.AddEndpoint(SubscriberEndpoint{Name: ep, Address: "127.0.0.1", Port: 8000})

	e := &testEngine{t: t, topic: "kv@127.0.0.1:8000@m", sent: map[uint64][]byte{}, done: make(chan struct{}), threeFrames: true,
		pub: zmq4.NewPub(context.Background(), zmq4.WithLogger(discardLogger)), router: zmq4.NewRouter(context.Background(), zmq4.WithLogger(discardLogger))}
	if err := e.router.Listen(fmt.Sprintf("tcp://127.0.0.1:%d", replayPort)); err != nil {
		t.Skipf("replay port taken meanwhile: %v", err)
	}
	if err := e.pub.Dial(sub.Addr()); err != nil {
		t.Fatal(err)
	}
	go e.serveReplay()
	t.Cleanup(e.close)
	runScenario(t, e, sub, sink, ep)

	// A second engine (data-parallel rank 1 of another pod) on the same
	// socket; and one nobody knows, which is dropped and counted.
	sub.AddEndpoint(SubscriberEndpoint{Name: "10.9.9.9:8001", Address: "10.9.9.9", Port: 8001, Rank: 1})
	e2 := newTestEngine(t, "kv@10.9.9.9@m", sub.Addr())
	toks := tokens(80, 16)
	keys := sink.BlockKeys(nil, "m", "", toks, 0)
	ev := engine{seed: 8, bt: 16}.stored(toks, 0, 1, "GPU")
	ranked := pack(t, []any{1.0, []any{[]any{"BlockStored", ev.BlockHashes, nil, ev.TokenIDs, 16, nil, "GPU"}}, 1})
	eventually(t, "the rank-1 engine", func() bool {
		e2.publish(0, ranked)
		return matchOf(sink.EventIndex, keys, "10.9.9.9:8001")[0] == 1
	})
	e3 := newTestEngine(t, "kv@10.7.7.7@m", sub.Addr())
	eventually(t, "the unknown engine's batches dropped", func() bool {
		e3.publish(0, ranked)
		return sub.Stats().UnknownEndpoints > 0
	})
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSubscriberReplayFailureIsCounted(t *testing.T) {
	noLeaks(t)
	e := newTestEngine(t, "kv@127.0.0.1@m", "")
	// Nothing listens on the replay port.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var mu sync.Mutex
	var seqs []uint64
	sink := SinkFunc(func(_ string, b *Batch) { mu.Lock(); seqs = append(seqs, b.Seq); mu.Unlock() })
	sub, err := NewSubscriber(SubscriberConfig{Port: port(t, e.pub), ReplayPort: dead, ReplayTimeout: 200 * time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sub.AddEndpoint(SubscriberEndpoint{Name: "a", Address: "127.0.0.1"})
	p := pack(t, []any{1.0, []any{}})
	got := func() []uint64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(seqs) }
	eventually(t, "the first batch", func() bool { e.publish(0, p); return len(got()) > 0 })
	e.publish(5, p)
	eventually(t, "the batch after the gap", func() bool { return slices.Contains(got(), 5) })
	if st := sub.Stats(); st.Gaps != 1 || st.ReplayFailures != 1 || st.Replayed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if !slices.IsSorted(got()) || slices.Contains(got()[1:], 0) {
		t.Fatalf("applied %v: duplicates of batch 0 must be dropped", got())
	}
}

func TestSubscriberConfigErrors(t *testing.T) {
	if _, err := NewSubscriber(SubscriberConfig{Mode: "multicast"}, SinkFunc(func(string, *Batch) {})); err == nil {
		t.Fatal("unknown mode accepted")
	}
	if _, err := NewSubscriber(SubscriberConfig{Mode: ModeBind}, SinkFunc(func(string, *Batch) {})); err == nil {
		t.Fatal("bind mode without an address accepted")
	}
	if _, err := NewSubscriber(SubscriberConfig{Mode: ModeBind, BindAddress: "bogus://x"}, SinkFunc(func(string, *Batch) {})); err == nil {
		t.Fatal("bad bind address accepted")
	}
}
