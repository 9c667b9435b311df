package flowcontrol

import (
	"math"
	"strconv"
	"strings"
)

// FCFS is the fcfs-ordering-policy, the default: items are dispatched in
// the order they were enqueued. It has no parameters.
type FCFS struct{}

var (
	_ OrderingPolicy = (*FCFS)(nil)
	_ Keyer          = (*FCFS)(nil)
)

// Less orders by enqueue order.
func (*FCFS) Less(a, b *Item) bool { return a.seq < b.seq }

// Key returns the enqueue sequence number.
func (*FCFS) Key(it *Item) int64 { return int64(it.seq) }

// EDF is the edf-ordering-policy: earliest deadline first, the deadline
// being the item's Due time (the earlier of the request's own deadline and
// its enqueue time plus the TTL); items without one come after those with
// one, and ties go first come, first served. It has no parameters.
type EDF struct{}

var (
	_ OrderingPolicy = (*EDF)(nil)
	_ Keyer          = (*EDF)(nil)
)

// Less orders by Due time.
func (*EDF) Less(a, b *Item) bool { return a.due < b.due }

// Key returns the Due time in Unix nanoseconds (MaxInt64 for none).
func (*EDF) Key(it *Item) int64 { return it.due }

// Headers read by SLODeadline (lower-case). The second is llm-d-router's
// older name, read when the first is absent.
const (
	HeaderSLOTTFT      = "x-llm-d-slo-ttft-ms"
	HeaderSLOTTFTAlias = "x-slo-ttft-ms"
)

// SLODeadline is the slo-deadline-ordering-policy: earliest SLO deadline
// first, the deadline being the request's arrival (Item.ReceivedTime) plus
// its time-to-first-token objective in milliseconds from the
// x-llm-d-slo-ttft-ms header. Requests without a valid header come after
// every request with one (mixing both in a band starves the former under
// sustained load); ties go first come, first served. It has no parameters.
type SLODeadline struct{}

var (
	_ OrderingPolicy = (*SLODeadline)(nil)
	_ Keyer          = (*SLODeadline)(nil)
)

// Less orders by SLO deadline.
func (*SLODeadline) Less(a, b *Item) bool { return sloDeadline(a) < sloDeadline(b) }

// Key returns the SLO deadline in Unix nanoseconds (MaxInt64 for none).
func (*SLODeadline) Key(it *Item) int64 { return sloDeadline(it) }

func sloDeadline(it *Item) int64 {
	v := it.Headers[HeaderSLOTTFT]
	if v == "" {
		v = it.Headers[HeaderSLOTTFTAlias]
	}
	if v == "" {
		return math.MaxInt64
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms < 0 {
		return math.MaxInt64
	}
	t := it.ReceivedTime().UnixNano()
	if ms > (math.MaxInt64-t)/1e6 {
		return math.MaxInt64
	}
	return t + ms*1e6
}
