package flowcontrol

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// FlowKey identifies a flow: the requests of one fairness id at one
// priority. Each flow has its own queue inside the band of its priority.
type FlowKey struct {
	ID       string // the fairness id (tenant, user, program)
	Priority int    // higher is served first; below 0 is sheddable
}

// String returns "ID@Priority", the form flows have in logs and traces.
func (k FlowKey) String() string { return fmt.Sprintf("%s@%d", k.ID, k.Priority) }

// Outcome is how an item left (or did not yet leave) the queue. Every
// enqueued item ends with exactly one outcome other than Pending.
type Outcome uint32

// Outcomes.
const (
	Pending    Outcome = iota // not yet enqueued, or waiting in its queue
	Dispatched                // the dispatcher released it: the request goes on
	Rejected                  // refused at enqueue: a capacity limit (ErrAtCapacity)
	Expired                   // waited longer than its TTL or its own deadline (ErrExpired)
	Cancelled                 // its caller went away while it waited (ErrCancelled)
	Drained                   // the controller shut down while it waited or at enqueue (ErrShuttingDown)
)

var outcomeNames = [...]string{"pending", "dispatched", "rejected", "expired", "cancelled", "drained"}

// String returns the outcome's lower-case name ("dispatched", "expired", ...).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint32(o))
}

// Errors of the controller. Every error it returns wraps one of them.
var (
	// ErrAtCapacity means the item would exceed a band's or the global
	// maxRequests or maxBytes (429 rejected-saturated).
	ErrAtCapacity = errors.New("flowcontrol: queue at capacity")
	// ErrExpired means the item waited its TTL (or reached its own Deadline)
	// without being dispatched (429 rejected-ttl-expired).
	ErrExpired = errors.New("flowcontrol: request expired in the queue")
	// ErrNoEndpoints is wrapped together with ErrExpired when the item
	// expired while the pool had no endpoints (503 rejected-no-endpoints).
	ErrNoEndpoints = errors.New("flowcontrol: the pool has no endpoints")
	// ErrCancelled means the caller's context was cancelled while the item
	// waited (503 rejected-context-cancelled).
	ErrCancelled = errors.New("flowcontrol: request cancelled while queued")
	// ErrShuttingDown means the controller is closed (503
	// rejected-shutting-down).
	ErrShuttingDown = errors.New("flowcontrol: controller shutting down")
)

// Item is one request in the flow-control queue. The caller fills the
// exported fields and hands the item to Controller.Enqueue or
// EnqueueAndWait; from then until the item is done the controller owns it
// and the caller must not modify it. A done item may be enqueued again.
type Item struct {
	// Flow is the item's flow: fairness id and priority.
	Flow FlowKey
	// Size is the item's size in bytes, counted against maxBytes (the
	// request body's length).
	Size int64
	// Headers are the request headers with lower-case names, for ordering
	// policies that read them (slo-deadline). Read-only.
	Headers map[string]string
	// Received is when the request arrived; zero means the enqueue time.
	Received time.Time
	// Deadline is the caller's own deadline (EnqueueAndWait takes the
	// context's); zero means none. The item expires at the earlier of its
	// Deadline and its enqueue time plus the controller's TTL.
	Deadline time.Time
	// Request is the caller's request, opaque to the controller (the
	// Director's *scheduling.Request); policies may inspect it.
	Request any

	// Owned by the controller, guarded by its lock.
	flow       *Flow
	idx        int    // index in the flow's heap
	seq        uint64 // enqueue order, unique per controller
	key        int64  // the ordering policy's key (Keyer), else 0
	enq        int64  // enqueue time, Unix nanoseconds
	due        int64  // earlier of Deadline and enqueue + TTL; math.MaxInt64 for none
	wait       time.Duration
	prev, next *Item // the controller's enqueue-order list (TTL expiry)
	done       chan struct{}
	cause      error // the context's cause, for Cancelled and deadline Expired
	noEps      bool  // expired while the pool had no endpoints
	outcome    atomic.Uint32
}

// Outcome returns how the item left the queue; Pending while it waits.
func (it *Item) Outcome() Outcome { return Outcome(it.outcome.Load()) }

// Err returns the error of a done item's outcome: nil for Dispatched (and
// Pending), otherwise an error wrapping the matching sentinel. Call it after
// the item is done.
func (it *Item) Err() error {
	switch it.Outcome() {
	case Rejected:
		return ErrAtCapacity
	case Expired:
		switch {
		case it.cause != nil:
			return fmt.Errorf("%w: %w", ErrExpired, it.cause)
		case it.noEps:
			return fmt.Errorf("%w while %w", ErrExpired, ErrNoEndpoints)
		}
		return ErrExpired
	case Cancelled:
		if it.cause != nil {
			return fmt.Errorf("%w: %w", ErrCancelled, it.cause)
		}
		return ErrCancelled
	case Drained:
		return ErrShuttingDown
	}
	return nil
}

// EnqueueTime returns when the item was enqueued. Policies call it.
func (it *Item) EnqueueTime() time.Time { return time.Unix(0, it.enq) }

// ReceivedTime returns Received, or the enqueue time when Received is zero.
func (it *Item) ReceivedTime() time.Time {
	if it.Received.IsZero() {
		return it.EnqueueTime()
	}
	return it.Received
}

// Due returns the time by which the item must leave the queue: the earlier
// of its Deadline and its enqueue time plus the controller's TTL. ok is
// false when neither applies.
func (it *Item) Due() (t time.Time, ok bool) {
	if it.due == math.MaxInt64 {
		return time.Time{}, false
	}
	return time.Unix(0, it.due), true
}

// Wait returns how long a done item waited in the queue.
func (it *Item) Wait() time.Duration { return it.wait }

// Seq returns the item's enqueue sequence number: unique per controller,
// increasing in enqueue order. Policies use it to break ties.
func (it *Item) Seq() uint64 { return it.seq }
