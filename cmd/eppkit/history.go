package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

// historyEntry is one earlier request of a --history file and where it went.
type historyEntry struct {
	Endpoint string          `json:"endpoint"` // ip:port (or the endpoint's name)
	Path     string          `json:"path"`     // default /v1/chat/completions
	Body     json.RawMessage `json:"body"`
}

// replayHistory feeds earlier requests through the producers and pre-request
// hooks as if each had been sent to its endpoint, so the prefix index (and
// any other per-endpoint state) is warm for the decision that follows.
func replayHistory(ctx context.Context, rt *config.Runtime, eps []*datalayer.Endpoint, file string, data []byte) (int, error) {
	var hist []historyEntry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hist); err != nil {
		return 0, fmt.Errorf("%s: want a JSON list of {\"endpoint\", \"path\", \"body\"}: %v", file, err)
	}
	for i, h := range hist {
		at := fmt.Sprintf("%s: [%d]", file, i)
		var ep *datalayer.Endpoint
		for _, e := range eps {
			if e.HostPort() == h.Endpoint || e.Name == h.Endpoint {
				ep = e
			}
		}
		if ep == nil {
			return i, fmt.Errorf("%s.endpoint: %q is not in the endpoints file", at, h.Endpoint)
		}
		path := h.Path
		if path == "" {
			path = "/v1/chat/completions"
		}
		body, err := rt.Selector.Parse(path, h.Body)
		if err != nil {
			return i, fmt.Errorf("%s.body: %v", at, err)
		}
		req := &scheduling.Request{ID: fmt.Sprintf("history-%d", i), IncomingModel: body.Model, TargetModel: body.Model, Body: body}
		if err := rt.Director.Record(ctx, req, eps, ep); err != nil {
			return i, fmt.Errorf("%s: %v", at, err)
		}
	}
	return len(hist), nil
}
