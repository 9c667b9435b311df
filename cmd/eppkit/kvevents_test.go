package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

func packPayload(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// samplePayload has every event type, a hash ≥ 2⁶³, a digest hash and
// extra keys.
func samplePayload(t *testing.T) []byte {
	digest := make([]byte, 32)
	digest[31] = 7
	return packPayload(t, []any{1712345678.5, []any{
		[]any{"BlockStored", []any{uint64(18446744073709551615), uint64(9223372036854775808)}, digest,
			[]any{1, 2, 3, 4}, 2, nil, nil, "sql-lora", []any{[]any{"sql-lora", "salt"}, nil}, 0},
		[]any{"BlockRemoved", []any{uint64(18446744073709551615)}, "CPU"},
		[]any{"AllBlocksCleared"},
	}, 1})
}

const sampleJSON = `{
  "ts": 1712345678.5,
  "dataParallelRank": 1,
  "events": [
    {
      "type": "BlockStored",
      "blockHashes": [18446744073709551615, 9223372036854775808],
      "parentBlockHash": 7,
      "tokenIds": [1, 2, 3, 4],
      "blockSize": 2,
      "loraId": null,
      "medium": "GPU",
      "loraName": "sql-lora",
      "extraKeys": [["sql-lora", "salt"], null],
      "groupIdx": 0
    },
    {"type": "BlockRemoved", "blockHashes": [18446744073709551615], "medium": "CPU", "groupIdx": null},
    {"type": "AllBlocksCleared"}
  ]
}`

func TestKVEventsDecode(t *testing.T) {
	payload := samplePayload(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "batch.msgpack")
	hexFile := filepath.Join(dir, "batch.hex")
	os.WriteFile(raw, payload, 0o644)                                                                             //nolint:errcheck // test
	os.WriteFile(hexFile, []byte(hex.EncodeToString(payload)[:10]+"\n "+hex.EncodeToString(payload)[10:]), 0o644) //nolint:errcheck // test

	var want any
	if err := json.Unmarshal([]byte(sampleJSON), &want); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{raw}, {"--hex", hexFile}} {
		code, out, errOut := eppkit(t, append([]string{"kvevents", "decode"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		// Hashes must be printed as exact integers, not floats.
		if !strings.Contains(out, "18446744073709551615") || !strings.Contains(out, "9223372036854775808") {
			t.Fatalf("hashes not exact:\n%s", out)
		}
		var got any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("%v:\n got %s\nwant %s", args, gotJSON, wantJSON)
		}
	}

	// stdin
	c := &cli{stdin: bytes.NewReader(payload), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, registry: nil}
	if code := c.run([]string{"kvevents", "decode", "-"}); code != exitOK {
		t.Fatalf("stdin: exit %d", code)
	}
	// Bad input: a non-zero exit and a message, never a panic.
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("\xc1\xc1 not msgpack"), 0o644) //nolint:errcheck // test
	for _, args := range [][]string{{garbage}, {"--hex", raw}, {filepath.Join(dir, "missing")}} {
		if code, _, errOut := eppkit(t, append([]string{"kvevents", "decode"}, args...)...); code != exitFail || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	for _, args := range [][]string{{"kvevents"}, {"kvevents", "decode"}, {"kvevents", "bogus"}, {"kvevents", "listen"}} {
		if code, _, _ := eppkit(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want usage", args, code)
		}
	}
}

func TestKVEventsListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + l.Addr().String()
	l.Close()

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := eppkit(t, "kvevents", "listen", "--bind", addr, "--count", "2", "--duration", "10s")
		done <- result{code, out, errOut}
	}()
	pub := zmq4.NewPub(context.Background())
	defer pub.Close()
	deadline := time.Now().Add(5 * time.Second)
	for pub.Dial(addr) != nil {
		if time.Now().After(deadline) {
			t.Fatal("cannot connect to the listener")
		}
		time.Sleep(10 * time.Millisecond)
	}
	payload := samplePayload(t)
	var r result
	for seq := uint64(0); ; seq++ {
		pub.Send(zmq4.NewMsgFrom([]byte("kv@10.0.0.1@m"), binary.BigEndian.AppendUint64(nil, seq), payload)) //nolint:errcheck // test
		select {
		case r = <-done:
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("listen did not stop after --count 2")
			}
			continue
		}
		break
	}
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), r.out)
	}
	var b struct {
		Topic, Endpoint, Model string
		Seq                    uint64
		Events                 []map[string]any
	}
	if err := json.Unmarshal([]byte(lines[0]), &b); err != nil {
		t.Fatal(err)
	}
	if b.Topic != "kv@10.0.0.1@m" || b.Endpoint != "10.0.0.1" || b.Model != "m" || len(b.Events) != 3 {
		t.Fatalf("batch %+v", b)
	}
}
