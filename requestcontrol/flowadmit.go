package requestcontrol

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// FlowAdmitter is the admission gate with flow control on (SPEC §3.4, §6):
// Admit enqueues the request in the Controller under its flow (fairness id
// × priority) and blocks until the controller dispatches it, or refuses it:
//
//	queue at capacity                     429 rejected-saturated
//	waited its TTL (or its own deadline)  429 rejected-ttl-expired
//	… while the pool had no endpoints     503 rejected-no-endpoints
//	client went away                      503 rejected-context-cancelled
//	controller shut down                  503 rejected-shutting-down
//
// It is also a ResponseComplete hook: a request that ends frees capacity,
// so it wakes the dispatcher. Set it as Director.Admission and append it to
// Director.ResponseCompletes after the hooks that release load (config.Build
// does both). The Controller's dispatcher must be running
// (flowcontrol.Controller.Start).
type FlowAdmitter struct {
	Controller *flowcontrol.Controller
	Logger     *slog.Logger // nil discards
	// Queued, when set, is called with each request's item once it is in
	// the queue, before Admit starts waiting: a caller that drives the
	// controller itself (Controller.Dispatch, as the simulator does in
	// virtual time) learns what is waiting. It must not block.
	Queued func(*flowcontrol.Item)
}

var (
	_ Admitter         = (*FlowAdmitter)(nil)
	_ ResponseComplete = (*FlowAdmitter)(nil)
)

// Admit waits in the queue until req is dispatched; see FlowAdmitter.
func (a *FlowAdmitter) Admit(ctx context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
	it := &flowcontrol.Item{
		Flow:    flowcontrol.FlowKey{ID: FairnessID(req), Priority: req.Priority},
		Headers: req.Headers,
		Request: req,
	}
	if req.Body != nil {
		it.Size = int64(len(req.Body.Raw))
	}
	if d, ok := ctx.Deadline(); ok {
		it.Deadline = d
	}
	err := a.Controller.Enqueue(it)
	if err == nil {
		if a.Queued != nil {
			a.Queued(it)
		}
		err = a.Controller.Wait(ctx, it)
	}
	if a.Logger != nil && a.Logger.Enabled(ctx, slog.LevelDebug) {
		attrs := []slog.Attr{slog.String("x-request-id", req.ID), slog.String("fairnessID", it.Flow.ID),
			slog.Int("priority", it.Flow.Priority), slog.String("outcome", it.Outcome().String()),
			slog.Duration("queueWait", it.Wait())}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		a.Logger.LogAttrs(ctx, slog.LevelDebug, "Flow control finished with the request", attrs...)
	}
	if err == nil {
		return nil
	}
	return flowRejection(err)
}

// flowRejection maps a flow-control error to its Rejection.
func flowRejection(err error) *Rejection {
	switch {
	case errors.Is(err, flowcontrol.ErrAtCapacity):
		return &Rejection{Status: http.StatusTooManyRequests, Reason: ReasonSaturated, Err: err}
	case errors.Is(err, flowcontrol.ErrNoEndpoints):
		return &Rejection{Status: http.StatusServiceUnavailable, Reason: ReasonNoEndpoints, Err: err}
	case errors.Is(err, flowcontrol.ErrExpired):
		return &Rejection{Status: http.StatusTooManyRequests, Reason: ReasonTTLExpired, Err: err}
	case errors.Is(err, flowcontrol.ErrCancelled):
		return &Rejection{Status: http.StatusServiceUnavailable, Reason: ReasonCancelled, Err: err}
	case errors.Is(err, flowcontrol.ErrShuttingDown):
		return &Rejection{Status: http.StatusServiceUnavailable, Reason: ReasonShutdown, Err: err}
	}
	return Reject(err)
}

// ResponseComplete wakes the dispatcher: the request's capacity is free.
func (a *FlowAdmitter) ResponseComplete(context.Context, *scheduling.Request, *scheduling.Endpoint, parsers.Usage, error) {
	a.Controller.Notify()
}
