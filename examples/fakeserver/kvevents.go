package fakeserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// KVEvents configures the KV-event publisher (SPEC §5.2): a ZeroMQ PUB
// socket sending vLLM's array-format event batches on topic
// kv@<host:port>@<model>, with an 8-byte big-endian sequence number from 0.
// (zmq4 v0.17.0 leaves one idle writer goroutine behind per closed PUB
// socket: leak checks in tests must ignore zmq4.(*pubMWriter).run.)
type KVEvents struct {
	// Endpoint is the ZeroMQ endpoint, e.g. "tcp://127.0.0.1:5557".
	Endpoint string
	// Bind makes the server listen at Endpoint (subscribers connect to
	// it); otherwise it connects to a subscriber bound there.
	Bind bool
	// Interval batches the events of this long into one message; default
	// 5ms.
	Interval time.Duration
}

type eventKind uint8

const (
	blockStored eventKind = iota
	blockRemoved
	allCleared
)

// event is one KV-cache event before encoding.
type event struct {
	kind      eventKind
	hashes    []uint64
	parent    *uint64
	tokens    []uint32
	blockSize int
	lora      string
}

// array returns the event in vLLM's array form: [tag, fields...].
func (ev event) array() []any {
	switch ev.kind {
	case blockStored:
		var parent, loraName any
		if ev.parent != nil {
			parent = *ev.parent
		}
		if ev.lora != "" {
			loraName = ev.lora
		}
		// block_hashes, parent_block_hash, token_ids, block_size, lora_id,
		// medium, lora_name.
		return []any{"BlockStored", ev.hashes, parent, ev.tokens, ev.blockSize, nil, "GPU", loraName}
	case blockRemoved:
		return []any{"BlockRemoved", ev.hashes, "GPU"}
	}
	return []any{"AllBlocksCleared"}
}

// encodeBatch encodes events as one vLLM event batch payload
// [ts, [events...], data_parallel_rank] in msgpack.
func encodeBatch(ts time.Time, evs []event) ([]byte, error) {
	arr := make([]any, len(evs))
	for i, ev := range evs {
		arr[i] = ev.array()
	}
	return msgpack.Marshal([]any{float64(ts.UnixNano()) / 1e9, arr, 0})
}

// publisher sends the engine's KV events.
type publisher struct {
	cfg   KVEvents
	topic []byte
	eng   *engine
	log   *slog.Logger
	sock  zmq4.Socket
	seq   uint64

	cancel context.CancelFunc
	wg     sync.WaitGroup
	sent   atomic.Uint64
}

// startPublisher opens the socket (binding at once, or connecting in the
// background with retries) and starts sending.
func startPublisher(cfg KVEvents, topic string, eng *engine, log *slog.Logger) (*publisher, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &publisher{cfg: cfg, topic: []byte(topic), eng: eng, log: log, cancel: cancel,
		sock: zmq4.NewPub(ctx, zmq4.WithDialerRetry(50*time.Millisecond), zmq4.WithDialerMaxRetries(-1))}
	if cfg.Bind {
		if err := p.sock.Listen(cfg.Endpoint); err != nil {
			cancel()
			_ = p.sock.Close()
			return nil, fmt.Errorf("fakeserver: kv events: listen %s: %w", cfg.Endpoint, err)
		}
	}
	p.wg.Add(1)
	go p.run(ctx)
	return p, nil
}

func (p *publisher) run(ctx context.Context) {
	defer p.wg.Done()
	if !p.cfg.Bind {
		if err := p.sock.Dial(p.cfg.Endpoint); err != nil {
			if ctx.Err() == nil {
				p.log.Warn("kv events: cannot connect", "endpoint", p.cfg.Endpoint, "error", err)
			}
			return
		}
	}
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.eng.notify:
		}
		select { // gather what arrives within one interval into one batch
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.flush()
	}
}

// flush sends the pending events as one message.
func (p *publisher) flush() {
	evs := p.eng.takeEvents()
	if len(evs) == 0 {
		return
	}
	payload, err := encodeBatch(time.Now(), evs)
	if err != nil {
		p.log.Error("kv events: encode", "error", err)
		return
	}
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], p.seq)
	p.seq++
	if err := p.sock.Send(zmq4.NewMsgFrom(p.topic, seq[:], payload)); err != nil {
		p.log.Warn("kv events: send", "error", err)
		return
	}
	p.sent.Add(1)
}

// close stops the publisher and closes the socket.
func (p *publisher) close() error {
	p.cancel()
	p.wg.Wait()
	return p.sock.Close()
}
