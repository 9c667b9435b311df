package redisindex

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// stepIndex returns an approximate index on srv under keyPrefix, closed
// when the test ends, and a mirror of its holders that follows the log only
// when the test steps it.
func stepIndex(t *testing.T, srv *redistest.Server, keyPrefix string) (*PrefixIndex, *mirror) {
	x, err := NewPrefixIndex(Config{Address: srv.Addr, KeyPrefix: keyPrefix, TTL: -1}, kvindex.PrefixIndexConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x, &mirror{c: x.c, h: x.h, moved: make(chan struct{})}
}

// steps steps m until it has read the log's end, at most ten times.
func steps(t *testing.T, m *mirror) {
	t.Helper()
	for range 10 {
		if err := m.step(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		m.mu.RLock()
		ok := m.current()
		m.mu.RUnlock()
		if ok {
			return
		}
	}
	t.Fatal("the mirror did not reach the log's end in ten steps")
}

func mirrorMatch(t *testing.T, m *mirror, chain []uint64, eps ...string) []int {
	t.Helper()
	got := make([]int, len(eps))
	if !m.matchPrefix(chain, eps, got) {
		t.Fatal("the mirror is not current")
	}
	return got
}

// TestMirrorGapReloads: a mirror that the log was trimmed past, or whose
// log was deleted and begun again (the server lost it), or that reads an
// entry it cannot decode, loads its copy again and ends up equal to the
// server.
func TestMirrorGapReloads(t *testing.T) {
	srv := redistest.Start(t)
	x, m := stepIndex(t, srv, "gap:")
	a, b := kvindextest.Chain(1, 8), kvindextest.Chain(2, 8)
	steps(t, m) // loads an empty index
	x.Add("e1", a)
	kvindextest.Sync(t, x)
	steps(t, m)
	if got := mirrorMatch(t, m, a, "e1", "e2"); !slices.Equal(got, []int{8, 0}) {
		t.Fatalf("matched %v, want [8 0]", got)
	}
	loads := x.c.mirrorLoads.Load()

	// Entries the mirror has not read are trimmed away.
	for i := range 5 {
		x.Add("e2", b[:i+1])
		kvindextest.Sync(t, x)
	}
	if _, err := srv.Do(time.Second, "XTRIM", "gap:al", "MAXLEN", "2"); err != nil {
		t.Fatal(err)
	}
	steps(t, m)
	if got := mirrorMatch(t, m, b, "e1", "e2"); !slices.Equal(got, []int{0, 5}) {
		t.Fatalf("after a gap: matched %v, want [0 5]", got)
	}
	if n := x.c.mirrorLoads.Load(); n != loads+1 {
		t.Fatalf("%d loads after the gap, want %d", n, loads+1)
	}

	// The server loses everything (a restart without persistence).
	if _, err := srv.Do(time.Second, "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	steps(t, m)
	if got := mirrorMatch(t, m, b, "e1", "e2"); !slices.Equal(got, []int{0, 0}) {
		t.Fatalf("after the server lost the index: matched %v, want [0 0]", got)
	}
	// ... and the log begins again, in a new epoch, before the mirror reads.
	m.mu.Lock()
	m.fresh = 0
	m.mu.Unlock()
	x.Add("e1", a[:3])
	kvindextest.Sync(t, x)
	if _, err := srv.Do(time.Second, "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	x.Add("e2", b[:2])
	kvindextest.Sync(t, x)
	steps(t, m)
	if got := mirrorMatch(t, m, b, "e1", "e2"); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("after the log began again: matched %v, want [0 2]", got)
	}
	if got := mirrorMatch(t, m, a, "e1"); got[0] != 0 {
		t.Fatalf("after the log began again: e1 matched %v, want 0", got)
	}

	// An entry the mirror cannot read (another writer's) loads it again.
	loads = x.c.mirrorLoads.Load()
	if _, err := srv.Do(time.Second, "XADD", "gap:al", "*", "k", "?", "p", "", "v", ""); err != nil {
		t.Fatal(err)
	}
	steps(t, m)
	if n := x.c.mirrorLoads.Load(); n != loads+1 {
		t.Fatalf("%d loads after a bad entry, want %d", n, loads+1)
	}
	if got := mirrorMatch(t, m, b, "e2"); got[0] != 2 {
		t.Fatalf("after a bad entry: matched %v, want 2", got)
	}
}

// TestMirrorCatchUp: catchUp returns once the mirror applied what the log
// held when it was called, and not before; it ends with ctx.
func TestMirrorCatchUp(t *testing.T) {
	srv := redistest.Start(t)
	x, m := stepIndex(t, srv, "catch:")
	steps(t, m)
	a := kvindextest.Chain(1, 8)
	x.Add("e", a)
	kvindextest.Sync(t, x)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := m.catchUp(ctx); err == nil {
		t.Fatal("catchUp returned before the mirror read the credit")
	}
	done := make(chan error, 1)
	go func() { done <- m.catchUp(context.Background()) }()
	steps(t, m)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := mirrorMatch(t, m, a, "e"); got[0] != 8 {
		t.Fatalf("matched %v, want 8", got)
	}
}

// TestMirrorBadEntries: entries the scripts never write are refused, so the
// mirror loads again rather than apply them (or allocate for them).
func TestMirrorBadEntries(t *testing.T) {
	m := &mirror{h: newHolderKeys("p:", "p", 2), hold: newBitmaps(0), ids: map[string]int{}}
	block := string([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	for _, v := range []map[string]any{
		{"k": "s", "p": "x", "v": block},
		{"k": "s", "p": "-1", "v": block},
		{"k": "s", "p": "131072", "v": block}, // past maxID ids of two bits
		{"k": "c", "p": "3", "v": block[:5]},
		{"k": "x", "p": "1,a", "v": block},
		{"k": "x", "p": "70000", "v": block},
		{"k": "i", "p": "65536", "v": "e"},
		{"k": "i", "p": "", "v": "e"},
		{"k": "f", "p": "z"},
		{"k": "?"},
		{},
	} {
		if err := m.op(v); err == nil {
			t.Errorf("entry %v accepted", v)
		}
	}
	if m.hold.len() != 0 || len(m.ids) != 0 {
		t.Fatalf("bad entries changed the copy: %v %v", m.hold, m.ids)
	}
	for _, v := range []map[string]any{
		{"k": "i", "p": "3", "v": "e"},
		{"k": "s", "p": "7", "v": block}, // id 3, CPU
		{"k": "s", "p": "6", "v": block}, // id 3, GPU
		{"k": "x", "p": "3", "v": block},
		{"k": "s", "p": "0", "v": block},
	} {
		if err := m.op(v); err != nil {
			t.Fatalf("entry %v: %v", v, err)
		}
	}
	if got := m.hold.get(1); !slices.Equal(got, []byte{1}) || m.ids["e"] != 3 {
		t.Fatalf("holders %x, ids %v; want 01 and e=3", got, m.ids)
	}
}
