package requestcontrol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// DataProducer writes typed data (declared by Produces) on the request or on
// request-scoped endpoint state before scheduling. Producers run in the
// dependency order the config loader computed. Produce is called concurrently
// for different requests; an error means "no data": the Director removes the
// producer's keys from the request so consumers never see stale values.
type DataProducer interface {
	plugins.Producer
	Produce(ctx context.Context, req *scheduling.Request, endpoints []*scheduling.Endpoint) error
}

// PreRequest runs after the pick, before the request is forwarded: update
// indexes with what the chosen endpoint will now hold, count in-flight load,
// set headers. It must not block on I/O.
type PreRequest interface {
	PreRequest(ctx context.Context, req *scheduling.Request, res *scheduling.Result)
}

// Named pairs a plugin with its instance name for logs and errors.
type Named[T any] struct {
	Name   string
	Plugin T
}

// Director runs producers, the scheduler and pre-request hooks.
type Director struct {
	Producers   []Named[DataProducer] // in dependency order
	Scheduler   *scheduling.Scheduler
	PreRequests []Named[PreRequest]
	Logger      *slog.Logger
}

// Decision is the outcome of a successful cycle.
type Decision struct {
	// Endpoints are "ip:port" strings, primary first, then fallbacks.
	Endpoints []string
	Result    *scheduling.Result
}

// Header returns the x-gateway-destination-endpoint value.
func (d *Decision) Header() string { return strings.Join(d.Endpoints, ",") }

// Drop reasons for x-llm-d-request-dropped-reason.
const (
	ReasonSaturated   = "rejected-saturated"
	ReasonNoEndpoints = "rejected-no-endpoints"
	ReasonTTLExpired  = "rejected-ttl-expired"
	ReasonCancelled   = "rejected-context-cancelled"
	ReasonShutdown    = "rejected-shutting-down"
)

// Rejection is a request the pipeline refuses, with the HTTP status and the
// drop reason to return.
type Rejection struct {
	Status int
	Reason string // empty for plain client errors
	Err    error
}

func (r *Rejection) Error() string {
	if r.Reason != "" {
		return fmt.Sprintf("%d %s: %v", r.Status, r.Reason, r.Err)
	}
	return fmt.Sprintf("%d: %v", r.Status, r.Err)
}

func (r *Rejection) Unwrap() error { return r.Err }

// Reject maps an error to a Rejection: no candidates → 503, all filtered →
// 429, an unknown profile asked for by the request → 400, anything else that is not already a Rejection → 500.
func Reject(err error) *Rejection {
	var r *Rejection
	switch {
	case errors.As(err, &r):
		return r
	case errors.Is(err, scheduling.ErrNoCandidates):
		return &Rejection{Status: http.StatusServiceUnavailable, Reason: ReasonNoEndpoints, Err: err}
	case errors.Is(err, scheduling.ErrUnknownProfile):
		// A profile named by a request header that does not exist.
		return &Rejection{Status: http.StatusBadRequest, Err: err}
	case errors.Is(err, scheduling.ErrAllFiltered):
		return &Rejection{Status: http.StatusTooManyRequests, Reason: ReasonSaturated, Err: err}
	default:
		return &Rejection{Status: http.StatusInternalServerError, Err: err}
	}
}

func (d *Director) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return d.Logger
}

// Schedule runs producers, the scheduler and pre-request hooks for req over
// candidates. Errors are *Rejection.
func (d *Director) Schedule(ctx context.Context, req *scheduling.Request, candidates []*scheduling.Endpoint) (*Decision, error) {
	if len(candidates) == 0 {
		return nil, Reject(scheduling.ErrNoCandidates)
	}
	for _, p := range d.Producers {
		if err := p.Plugin.Produce(ctx, req, candidates); err != nil {
			for _, k := range p.Plugin.Produces() {
				req.Data.Delete(k.KeyName())
			}
			d.logger().Warn("data producer failed; its consumers see no data",
				"producer", p.Name, "request", req.ID, "err", err)
		}
	}
	res, err := d.Scheduler.Schedule(ctx, req, candidates)
	if err != nil {
		return nil, Reject(err)
	}
	for _, h := range d.PreRequests {
		h.Plugin.PreRequest(ctx, req, res)
	}
	primary := res.PrimaryResult()
	eps := make([]string, len(primary.Endpoints))
	for i, e := range primary.Endpoints {
		eps[i] = e.HostPort()
	}
	return &Decision{Endpoints: eps, Result: res}, nil
}
