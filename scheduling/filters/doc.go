// Package filters holds the stock scheduling filters: label-selector-filter
// (Kubernetes-style label selection), lora-affinity-filter (keep the
// endpoints that serve, or can load, the requested LoRA adapter) and
// prefix-cache-affinity-filter (keep a warm conversation on the endpoints
// whose prefix match is near the best).
//
// A filter returns the kept endpoints in their original order. When it keeps
// every endpoint it returns the input slice itself and allocates nothing; it
// never modifies the input slice. Filters are safe for concurrent use.
package filters
