package datalayer

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Store holds the pool's current endpoints as immutable snapshots. Readers
// (the request path) call Endpoints: one atomic load, no lock, no copy.
// Writers (discovery through Set, data sources through the Runtime, a
// simulator through Replace) are serialised and publish a new list: a changed
// endpoint is a new *Endpoint, never a modified one, so a list a reader holds
// stays valid and consistent for as long as it keeps it.
//
// A Store has no goroutines; it is safe for concurrent use.
type Store struct {
	pool      Pool
	listeners []EndpointListener

	mu   sync.Mutex // serialises writers
	snap atomic.Pointer[snapshot]
}

// snapshot is one published state. index maps names to positions in eps; a
// metrics update keeps every position, so it shares the index of the
// snapshot it replaces.
type snapshot struct {
	eps   []*Endpoint
	index map[string]int
}

// NewStore returns an empty store for pool that tells listeners when
// endpoints join or leave (see EndpointListener).
func NewStore(pool Pool, listeners ...EndpointListener) (*Store, error) {
	if err := pool.Validate(); err != nil {
		return nil, err
	}
	pool.Selector = maps.Clone(pool.Selector)
	pool.TargetPorts = slices.Clone(pool.TargetPorts)
	s := &Store{pool: pool, listeners: slices.Clone(listeners)}
	s.snap.Store(&snapshot{index: map[string]int{}})
	return s, nil
}

// Pool returns the pool the store selects endpoints with.
func (s *Store) Pool() Pool { return s.pool }

// Endpoints returns the current endpoints, sorted by name. The slice and the
// endpoints are shared, read-only snapshots: do not modify them.
func (s *Store) Endpoints() []*Endpoint { return s.snap.Load().eps }

// Get returns the current snapshot of the endpoint called name.
func (s *Store) Get(name string) (*Endpoint, bool) {
	snap := s.snap.Load()
	if i, ok := snap.index[name]; ok {
		return snap.eps[i], true
	}
	return nil, false
}

// Diff says what a Set changed, by endpoint name.
type Diff struct {
	Added   []string
	Updated []string // labels or rank changed; metrics and attributes kept
	Removed []string
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool { return len(d.Added)+len(d.Updated)+len(d.Removed) == 0 }

// Set makes the endpoints the pool selects from targets the current ones,
// which is how a discovery Source reports: the complete set each time. It
// diffs against the current endpoints by name: a new name is added with
// fresh metrics; a known name at the same address and port keeps its
// metrics and attributes (with new labels if they changed); a known name at
// another address or port is removed and added again; a missing name is
// removed. Listeners hear of additions before the new list is published and
// of removals after (of a moved endpoint: removal, then addition, before).
// Invalid targets are skipped and reported in the error; the rest are
// applied.
func (s *Store) Set(targets []Target) (Diff, error) {
	want, err := s.pool.Endpoints(targets)

	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.snap.Load()
	var (
		diff                  Diff
		added, moved, removed []*Endpoint
		next                  = make([]*Endpoint, 0, len(want))
		index                 = make(map[string]int, len(want))
	)
	for _, w := range want {
		if i, ok := cur.index[w.Name]; ok {
			old := cur.eps[i]
			if old.Address == w.Address && old.Port == w.Port {
				if old.Rank != w.Rank || !maps.Equal(old.Labels, w.Labels) {
					c := *old
					c.Labels, c.Rank = w.Labels, w.Rank
					old = &c
					diff.Updated = append(diff.Updated, w.Name)
				}
				index[w.Name] = len(next)
				next = append(next, old)
				continue
			}
			moved = append(moved, old) // removed, then added afresh
		}
		added = append(added, w)
		index[w.Name] = len(next)
		next = append(next, w)
	}
	for _, old := range cur.eps {
		if _, keep := index[old.Name]; !keep {
			removed = append(removed, old)
		}
	}
	// A moved endpoint keeps its name, so its listeners hear of the removal
	// before the addition: state keyed by name is rebuilt, not dropped.
	s.notify(moved, false, &diff.Removed)
	s.notify(added, true, &diff.Added)
	if len(added)+len(removed)+len(moved)+len(diff.Updated) > 0 {
		s.snap.Store(&snapshot{eps: next, index: index})
	}
	s.notify(removed, false, &diff.Removed)
	slices.Sort(diff.Removed)
	return diff, err
}

func (s *Store) notify(eps []*Endpoint, added bool, names *[]string) {
	for _, e := range eps {
		*names = append(*names, e.Name)
		for _, l := range s.listeners {
			if added {
				l.EndpointAdded(e)
			} else {
				l.EndpointRemoved(e)
			}
		}
	}
}

// Replace publishes new snapshots of current endpoints: each of eps replaces
// the current endpoint of the same name if that one is still at the same
// address and port; others are ignored. It returns how many it replaced.
// Derive the new values from the current ones, e.g.
//
//	if e, ok := s.Get(name); ok {
//		s.Replace(e.WithMetrics(m))
//	}
func (s *Store) Replace(eps ...*Endpoint) int {
	n := 0
	s.edit(func(list []*Endpoint, index map[string]int) bool {
		for _, e := range eps {
			if i, ok := index[e.Name]; ok && list[i].Address == e.Address && list[i].Port == e.Port {
				list[i] = e
				n++
			}
		}
		return n > 0
	})
	return n
}

// edit calls fn with a private copy of the current list (same positions) and
// its index under the writer lock, and publishes the copy if fn reports a
// change. fn must not keep list.
func (s *Store) edit(fn func(list []*Endpoint, index map[string]int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.snap.Load()
	next := slices.Clone(cur.eps)
	if fn(next, cur.index) {
		s.snap.Store(&snapshot{eps: next, index: cur.index})
	}
}
