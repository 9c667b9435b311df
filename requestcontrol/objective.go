package requestcontrol

import (
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Request headers the Director reads (lower-case). Each llm-d header has a
// Gateway API Inference Extension alias, accepted when the first is absent.
const (
	HeaderObjective      = "x-llm-d-inference-objective"
	HeaderObjectiveAlias = "x-gateway-inference-objective"
	HeaderFairnessID     = "x-llm-d-inference-fairness-id"
	HeaderFairnessAlias  = "x-gateway-inference-fairness-id"
	HeaderModelRewrite   = "x-llm-d-model-name-rewrite"
	HeaderRewriteAlias   = "x-gateway-model-name-rewrite"
	// HeaderDestination carries the pick to the gateway. The Director sets
	// it; an inbound copy is never trusted and is removed.
	HeaderDestination = "x-gateway-destination-endpoint"
	// HeaderPrefiller names the prefill endpoint in disaggregated serving;
	// like the destination, only the Director's plugins set it.
	HeaderPrefiller = "x-prefiller-host-port"
)

// UntrustedHeaders are the request headers that only the picker may set: the
// Director deletes inbound copies before any plugin sees the request, and
// adapters must remove them from the forwarded request unless the Exchange
// sets them.
var UntrustedHeaders = []string{HeaderDestination, HeaderPrefiller}

// DefaultFairnessID is the fairness id of a request without one.
const DefaultFairnessID = "default-flow"

// Objectives maps InferenceObjective names to their priority. A request
// names its objective in the x-llm-d-inference-objective header; no
// objective, or one not in the map, means priority 0.
type Objectives map[string]int

var (
	objectiveKey  = plugins.NewKey[string]("requestcontrol/objective")
	fairnessIDKey = plugins.NewKey[string]("requestcontrol/fairness-id")
)

// Objective returns the objective name the request asked for ("" for none).
func Objective(req *scheduling.Request) string {
	s, _ := plugins.Get(&req.Data, objectiveKey)
	return s
}

// FairnessID returns the request's fairness id: its
// x-llm-d-inference-fairness-id header, or DefaultFairnessID.
func FairnessID(req *scheduling.Request) string {
	if s, ok := plugins.Get(&req.Data, fairnessIDKey); ok {
		return s
	}
	return DefaultFairnessID
}

// header returns the first non-empty header of names.
func header(h map[string]string, names ...string) string {
	for _, n := range names {
		if v := h[n]; v != "" {
			return v
		}
	}
	return ""
}
