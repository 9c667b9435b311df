package scorers

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/eppkit/eppkit/scheduling"
)

// DefaultSessionHeader is the session-affinity scorer's default header.
const DefaultSessionHeader = "x-session-token"

// SessionAffinity is the session-affinity-scorer: the endpoint named by the
// request's session token scores 1, the others 0, so a conversation stays
// where its KV cache is. The token is the base64 of an endpoint name; the
// scorer writes it on every response (as a ResponseHeader hook), naming the
// endpoint that served, for the client to send back.
type SessionAffinity struct {
	HeaderName string `json:"headerName" doc:"request and response header carrying the session token"`
}

var _ scheduling.Scorer = (*SessionAffinity)(nil)

// SetDefaults sets the header name.
func (s *SessionAffinity) SetDefaults() { s.HeaderName = DefaultSessionHeader }

// Validate checks the header name.
func (s *SessionAffinity) Validate() error {
	if strings.TrimSpace(s.HeaderName) == "" {
		return errors.New("headerName: must not be empty")
	}
	return nil
}

func (s *SessionAffinity) header() string {
	if s.HeaderName == "" {
		return DefaultSessionHeader
	}
	return strings.ToLower(s.HeaderName)
}

// Score implements scheduling.Scorer. A missing or undecodable token scores
// every endpoint 0.
func (s *SessionAffinity) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	tok := req.Headers[s.header()]
	if tok == "" {
		return
	}
	name, err := base64.StdEncoding.DecodeString(tok)
	if err != nil {
		return
	}
	for i, e := range eps {
		if e.Name == string(name) {
			scores[i] = 1
		}
	}
}

// ResponseHeader writes the session token naming the endpoint that served.
func (s *SessionAffinity) ResponseHeader(_ context.Context, _ *scheduling.Request, served *scheduling.Endpoint, h http.Header) {
	if served == nil {
		return
	}
	h.Set(s.header(), SessionToken(served))
}

// SessionToken returns the session token that names e.
func SessionToken(e *scheduling.Endpoint) string {
	return base64.StdEncoding.EncodeToString([]byte(e.Name))
}
