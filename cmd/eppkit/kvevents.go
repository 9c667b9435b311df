package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/eppkit/eppkit/kvindex"
)

const kveventsUsage = `usage: eppkit kvevents <command> [arguments]

commands:
  decode [--hex] FILE|-          decode one msgpack event-batch payload to JSON
  listen --bind ADDR [--count N] [--duration D]
                                 bind a ZeroMQ SUB socket engines publish to and
                                 print each batch as a JSON line
`

// kvevents runs "eppkit kvevents ...".
func (c *cli) kvevents(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, kveventsUsage)
		return exitUsage
	}
	switch args[0] {
	case "decode":
		return c.kveventsDecode(args[1:])
	case "listen":
		return c.kveventsListen(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, kveventsUsage)
		return exitOK
	}
	fmt.Fprintf(c.stderr, "eppkit: unknown kvevents command %q\n\n%s", args[0], kveventsUsage)
	return exitUsage
}

func (c *cli) kveventsDecode(args []string) int {
	fs := c.flags("kvevents decode", "kvevents decode [--hex] FILE|-")
	isHex := fs.Bool("hex", false, "the input is the payload in hexadecimal (whitespace ignored)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return c.usageError("kvevents decode: want one FILE or - (stdin)")
	}
	var (
		data []byte
		err  error
	)
	if fs.Arg(0) == "-" {
		data, err = io.ReadAll(io.LimitReader(c.stdin, kvindex.DefaultMaxPayload*2+1))
	} else {
		data, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return c.fail("kvevents decode: %v", err)
	}
	if *isHex {
		data, err = hex.DecodeString(string(bytes.Join(bytes.Fields(data), nil)))
		if err != nil {
			return c.fail("kvevents decode: --hex: %v", err)
		}
	}
	var dec kvindex.Decoder
	b, err := dec.Decode("", 0, data)
	if err != nil {
		return c.fail("kvevents decode: %v", err)
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(batchJSON(b, false)); err != nil {
		return c.fail("kvevents decode: %v", err)
	}
	return exitOK
}

func (c *cli) kveventsListen(args []string) int {
	fs := c.flags("kvevents listen", "kvevents listen --bind ADDR [--count N] [--duration D] [--topic PREFIX]")
	bind := fs.String("bind", "", "ZeroMQ address to bind, e.g. tcp://127.0.0.1:5557 (engines connect to it)")
	count := fs.Int("count", 0, "exit after this many batches (0: no limit)")
	duration := fs.Duration("duration", 0, "exit after this long (0: no limit; Ctrl-C stops too)")
	topic := fs.String("topic", kvindex.DefaultTopicFilter, "topic prefix to subscribe to")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *bind == "" || fs.NArg() != 0 {
		return c.usageError("kvevents listen: want --bind ADDR and no arguments")
	}
	if *count < 0 || *duration < 0 {
		return c.usageError("kvevents listen: --count and --duration must be ≥ 0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	ctx, done := context.WithCancel(ctx)
	defer done()

	var (
		mu   sync.Mutex
		seen int
		werr error
	)
	enc := json.NewEncoder(c.stdout)
	sink := kvindex.SinkFunc(func(_ string, b *kvindex.Batch) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil || (*count > 0 && seen >= *count) {
			return
		}
		if err := enc.Encode(batchJSON(b, true)); err != nil && werr == nil {
			werr = err
			done()
		}
		if seen++; *count > 0 && seen >= *count {
			done()
		}
	})
	sub, err := kvindex.NewSubscriber(kvindex.SubscriberConfig{
		Mode: kvindex.ModeBind, BindAddress: *bind, TopicFilter: *topic, AcceptUnknown: true,
	}, sink)
	if err != nil {
		return c.fail("kvevents listen: %v", err)
	}
	fmt.Fprintf(c.stderr, "eppkit: listening on %s\n", sub.Addr())
	<-ctx.Done()
	sub.Close()
	st := sub.Stats()
	fmt.Fprintf(c.stderr, "eppkit: %d batches, %d malformed, %d duplicates, %d gaps, %d restarts\n",
		st.Applied, st.Malformed, st.Duplicates, st.Gaps, st.Restarts)
	if werr != nil {
		return c.fail("kvevents listen: %v", werr)
	}
	return exitOK
}

// The JSON of a decoded batch (SPEC §10): field names are an interface;
// add fields, never rename them. Hashes are exact unsigned integers.
type (
	batchOut struct {
		Topic            string     `json:"topic,omitempty"`
		Endpoint         string     `json:"endpoint,omitempty"`
		Model            string     `json:"model,omitempty"`
		Seq              *uint64    `json:"seq,omitempty"`
		TS               float64    `json:"ts"`
		DataParallelRank *int64     `json:"dataParallelRank"`
		Events           []eventOut `json:"events"`
		UnknownEvents    int        `json:"unknownEvents,omitempty"`
	}
	eventOut struct {
		Type            string    `json:"type"`
		BlockHashes     *[]uint64 `json:"blockHashes,omitempty"`
		ParentBlockHash *uint64   `json:"parentBlockHash"`
		TokenIDs        *[]uint32 `json:"tokenIds,omitempty"`
		BlockSize       *int      `json:"blockSize,omitempty"`
		LoRAID          *int64    `json:"loraId"`
		Medium          string    `json:"medium,omitempty"`
		LoRAName        *string   `json:"loraName"`
		ExtraKeys       any       `json:"extraKeys"`
		GroupIdx        *int64    `json:"groupIdx"`
		SpecKind        string    `json:"kvCacheSpecKind,omitempty"`
		SlidingWindow   *int64    `json:"kvCacheSpecSlidingWindow,omitempty"`
		CacheSalt       string    `json:"cacheSalt,omitempty"`
	}
)

// MarshalJSON writes the fields of the event's type only.
func (e eventOut) MarshalJSON() ([]byte, error) {
	switch e.Type {
	case "AllBlocksCleared":
		return json.Marshal(struct {
			Type string `json:"type"`
		}{e.Type})
	case "BlockRemoved":
		return json.Marshal(struct {
			Type        string    `json:"type"`
			BlockHashes *[]uint64 `json:"blockHashes"`
			Medium      string    `json:"medium"`
			GroupIdx    *int64    `json:"groupIdx"`
		}{e.Type, e.BlockHashes, e.Medium, e.GroupIdx})
	}
	type plain eventOut // without this method
	return json.Marshal(plain(e))
}

func batchJSON(b *kvindex.Batch, withSource bool) batchOut {
	out := batchOut{TS: b.Timestamp, Events: make([]eventOut, 0, len(b.Events)), UnknownEvents: b.Unknown}
	if withSource {
		seq := b.Seq
		out.Topic, out.Endpoint, out.Model, out.Seq = b.Topic, b.Endpoint, b.Model, &seq
	}
	if b.HasRank {
		r := b.DataParallelRank
		out.DataParallelRank = &r
	}
	for _, ev := range b.Events {
		e := eventOut{Type: ev.Kind.String(), Medium: ev.Medium, SpecKind: ev.SpecKind, CacheSalt: ev.CacheSalt}
		hashes := append([]uint64{}, ev.BlockHashes...)
		e.BlockHashes = &hashes
		if ev.HasParent {
			h := ev.ParentHash
			e.ParentBlockHash = &h
		}
		toks := append([]uint32{}, ev.TokenIDs...)
		e.TokenIDs = &toks
		bs := ev.BlockSize
		e.BlockSize = &bs
		if ev.HasLoRAID {
			id := ev.LoRAID
			e.LoRAID = &id
		}
		if ev.HasLoRAName {
			n := ev.LoRAName
			e.LoRAName = &n
		}
		if ev.HasGroup {
			g := ev.GroupIdx
			e.GroupIdx = &g
		}
		if ev.HasSlidingWindow {
			w := ev.SlidingWindow
			e.SlidingWindow = &w
		}
		if ev.ExtraKeys != nil {
			var v any
			if err := msgpack.Unmarshal(ev.ExtraKeys, &v); err == nil {
				e.ExtraKeys = jsonable(v)
			}
		}
		out.Events = append(out.Events, e)
	}
	return out
}

// jsonable converts what msgpack decodes into values encoding/json accepts:
// maps with non-string keys get their keys printed.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return v
}
