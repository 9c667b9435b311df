package requestcontrol

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// Drop reasons for x-llm-d-request-dropped-reason.
const (
	ReasonSaturated   = "rejected-saturated"
	ReasonNoEndpoints = "rejected-no-endpoints"
	ReasonTTLExpired  = "rejected-ttl-expired"
	ReasonCancelled   = "rejected-context-cancelled"
	ReasonShutdown    = "rejected-shutting-down"
	// ReasonDenied is the reason of a denial by a custom Admitter that did
	// not choose its own.
	ReasonDenied = "rejected-admission-denied"
)

// HeaderDroppedReason is the response header carrying a Rejection's reason.
const HeaderDroppedReason = "x-llm-d-request-dropped-reason"

// Rejection is a request the pipeline refuses, with the HTTP status and the
// drop reason to return.
type Rejection struct {
	Status int
	Reason string // empty for plain client errors
	Err    error
}

// Error returns "STATUS REASON: cause", or "STATUS: cause" without a reason.
func (r *Rejection) Error() string {
	if r.Reason != "" {
		return fmt.Sprintf("%d %s: %v", r.Status, r.Reason, r.Err)
	}
	return fmt.Sprintf("%d: %v", r.Status, r.Err)
}

// Unwrap returns the cause, so errors.Is sees the sentinel behind a rejection.
func (r *Rejection) Unwrap() error { return r.Err }

// Headers returns the response headers of the rejection: the drop reason,
// when there is one.
func (r *Rejection) Headers() map[string]string {
	if r.Reason == "" {
		return nil
	}
	return map[string]string{HeaderDroppedReason: r.Reason}
}

// Deny returns the 429 rejection an Admitter returns to deny a request with
// its own reason.
func Deny(reason string, err error) *Rejection {
	return &Rejection{Status: http.StatusTooManyRequests, Reason: reason, Err: err}
}

// Reject maps an error to a Rejection: an existing *Rejection as is; a parse
// error (parsers.ErrBadRequest, parsers.ErrNoParser) or an unknown profile
// asked for by the request → 400; no candidates → 503 rejected-no-endpoints;
// all filtered → 429 rejected-saturated; a cancelled context → 503
// rejected-context-cancelled; an expired one → 429 rejected-ttl-expired;
// anything else → 500.
func Reject(err error) *Rejection {
	var r *Rejection
	switch {
	case errors.As(err, &r):
		return r
	case errors.Is(err, parsers.ErrBadRequest), errors.Is(err, parsers.ErrNoParser):
		return &Rejection{Status: http.StatusBadRequest, Err: err}
	case errors.Is(err, scheduling.ErrNoCandidates):
		return &Rejection{Status: http.StatusServiceUnavailable, Reason: ReasonNoEndpoints, Err: err}
	case errors.Is(err, scheduling.ErrUnknownProfile):
		// A profile named by a request header that does not exist.
		return &Rejection{Status: http.StatusBadRequest, Err: err}
	case errors.Is(err, scheduling.ErrAllFiltered):
		return &Rejection{Status: http.StatusTooManyRequests, Reason: ReasonSaturated, Err: err}
	case errors.Is(err, context.Canceled):
		return &Rejection{Status: http.StatusServiceUnavailable, Reason: ReasonCancelled, Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Rejection{Status: http.StatusTooManyRequests, Reason: ReasonTTLExpired, Err: err}
	default:
		return &Rejection{Status: http.StatusInternalServerError, Err: err}
	}
}
