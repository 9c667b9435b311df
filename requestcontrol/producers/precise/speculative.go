package precise

import (
	"sync"
	"time"
)

// maxSpeculative bounds the speculative credits kept (oldest dropped first).
const maxSpeculative = 100_000

// speculative holds short-lived credits: after a pick, the chosen endpoint is
// expected to hold the request's blocks before its engine says so. Credits
// expire after ttl; expired ones are swept when credits are added (no
// janitor goroutine).
type speculative struct {
	ttl   time.Duration
	mu    sync.RWMutex
	byKey map[uint64][]specHolder // block key → endpoints credited with it
	queue []specRecord            // credits in the order given (= expiry order)
	head  int
}

type specHolder struct {
	endpoint string
	expires  int64 // unix nanoseconds
}

type specRecord struct {
	endpoint string
	keys     []uint64
	expires  int64
}

func newSpeculative(ttl time.Duration) *speculative {
	return &speculative{ttl: ttl, byKey: map[uint64][]specHolder{}}
}

// add credits endpoint with keys until now + ttl. keys must not be modified
// afterwards.
func (s *speculative) add(endpoint string, keys []uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now.UnixNano(), len(s.queue)-s.head >= maxSpeculative)
	exp := now.Add(s.ttl).UnixNano()
	for _, k := range keys {
		hs := s.byKey[k]
		found := false
		for i := range hs {
			if hs[i].endpoint == endpoint {
				hs[i].expires, found = exp, true
				break
			}
		}
		if !found {
			s.byKey[k] = append(hs, specHolder{endpoint, exp})
		}
	}
	s.queue = append(s.queue, specRecord{endpoint, keys, exp})
}

// sweep drops the credits expired at now, and the oldest one if full.
func (s *speculative) sweep(now int64, full bool) {
	for s.head < len(s.queue) && (s.queue[s.head].expires <= now || full) {
		full = false
		r := s.queue[s.head]
		s.queue[s.head] = specRecord{}
		s.head++
		for _, k := range r.keys {
			hs := s.byKey[k]
			for i := range hs {
				// A later credit of the same endpoint refreshed it: keep.
				if hs[i].endpoint == r.endpoint && hs[i].expires <= r.expires {
					hs = append(hs[:i], hs[i+1:]...)
					break
				}
			}
			if len(hs) == 0 {
				delete(s.byKey, k)
			} else {
				s.byKey[k] = hs
			}
		}
	}
	if s.head > len(s.queue)/2 && s.head > 64 {
		s.queue = append(s.queue[:0], s.queue[s.head:]...)
		s.head = 0
	}
}

// match raises matched[i] to the number of consecutive blocks, from block
// 0, endpoints[i] is credited with (at GPU weight 1).
func (s *speculative) match(keys []uint64, endpoints []string, now time.Time, matched []float64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.byKey) == 0 {
		return
	}
	if len(keys) == 0 || len(s.byKey[keys[0]]) == 0 {
		return // the common case: no credit for this prompt
	}
	t := now.UnixNano()
	at := make(map[string][]int, len(endpoints)) // positions of each endpoint
	for i, e := range endpoints {
		at[e] = append(at[e], i)
	}
	runs := make([]int, len(endpoints))
	for d, k := range keys {
		advanced := false
		for _, h := range s.byKey[k] {
			if h.expires <= t {
				continue
			}
			for _, i := range at[h.endpoint] {
				if runs[i] == d {
					runs[i] = d + 1
					advanced = true
				}
			}
		}
		if !advanced {
			break
		}
	}
	for i, r := range runs {
		matched[i] = max(matched[i], float64(r))
	}
}

// removeEndpoint drops an endpoint's credits.
func (s *speculative) removeEndpoint(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, hs := range s.byKey {
		hs = deleteHolder(hs, endpoint)
		if len(hs) == 0 {
			delete(s.byKey, k)
		} else {
			s.byKey[k] = hs
		}
	}
}

func deleteHolder(hs []specHolder, endpoint string) []specHolder {
	out := hs[:0]
	for _, h := range hs {
		if h.endpoint != endpoint {
			out = append(out, h)
		}
	}
	return out
}
