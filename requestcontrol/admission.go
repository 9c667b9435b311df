package requestcontrol

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

// Admitter decides whether a request may go on. The Director calls its
// admission gate (Director.Admission: the default saturation admission, or
// flow control) after the objective is resolved and before candidates are
// chosen, with the pool's endpoints; it calls custom admitters
// (Director.Admitters) after the data producers and before scheduling, with
// the candidates, so they can read produced data. Admit is called
// concurrently for different requests; it may block until ctx is done (flow
// control waits for dispatch). It returns nil to admit; an error denies: a
// *Rejection is returned to the client as is (see Deny), any other error
// becomes 429 with reason rejected-admission-denied, never a 500.
type Admitter interface {
	Admit(ctx context.Context, req *scheduling.Request, endpoints []*scheduling.Endpoint) error
}

// AdmitterFunc adapts a function to Admitter.
type AdmitterFunc func(ctx context.Context, req *scheduling.Request, endpoints []*scheduling.Endpoint) error

// Admit calls f.
func (f AdmitterFunc) Admit(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) error {
	return f(ctx, req, eps)
}

// SaturationDetector reports how loaded a set of endpoints is: 0 idle, 1
// saturated, above 1 overloaded. It is called concurrently, on every
// request, and must be cheap and must not block. (The flow-control layer's
// detectors have the same method, so one plugin serves both.)
type SaturationDetector interface {
	Saturation(ctx context.Context, endpoints []*datalayer.Endpoint) float64
}

// ErrSaturated is the error of a sheddable request shed at saturation.
var ErrSaturated = errors.New("system saturated, sheddable request dropped")

// SaturationAdmitter is the default admission gate (SPEC §3.4, flow control
// off): a sheddable request (priority < 0) is rejected with 429
// rejected-saturated while Detector reports saturation ≥ 1; a request with
// priority ≥ 0 always passes. A nil Detector never reports saturation.
type SaturationAdmitter struct {
	Detector SaturationDetector
	Logger   *slog.Logger // nil discards
}

var _ Admitter = (*SaturationAdmitter)(nil)

// Admit implements Admitter.
func (a *SaturationAdmitter) Admit(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) error {
	if req.Priority >= 0 || a.Detector == nil {
		return nil
	}
	s := a.Detector.Saturation(ctx, eps)
	if s < 1 {
		return nil
	}
	if a.Logger != nil && a.Logger.Enabled(ctx, slog.LevelDebug) {
		a.Logger.LogAttrs(ctx, slog.LevelDebug, "Request rejected: system saturated and request is sheddable",
			slog.String("x-request-id", req.ID), slog.String("objectiveKey", Objective(req)),
			slog.Int("priority", req.Priority), slog.Float64("saturation", s))
	}
	return &Rejection{Status: http.StatusTooManyRequests, Reason: ReasonSaturated, Err: ErrSaturated}
}
