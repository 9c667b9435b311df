package filters

import "github.com/eppkit/eppkit/scheduling"

// keep returns the endpoints for which ok is true, in order: eps itself when
// that is all of them (no allocation), else a new slice.
func keep(eps []*scheduling.Endpoint, ok func(*scheduling.Endpoint) bool) []*scheduling.Endpoint {
	for i, e := range eps {
		if ok(e) {
			continue
		}
		out := make([]*scheduling.Endpoint, i, len(eps)-1)
		copy(out, eps[:i])
		for _, e := range eps[i+1:] {
			if ok(e) {
				out = append(out, e)
			}
		}
		return out
	}
	return eps
}
