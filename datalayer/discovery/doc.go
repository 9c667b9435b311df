// Package discovery holds the stock discovery sources of the data layer
// (datalayer.Source): static-discovery, a fixed list written in the
// configuration or in Go, and file-discovery, a YAML or JSON file of
// endpoints, optionally reloaded when it changes.
//
// Both report the complete set of targets; the data layer diffs each set
// against the current endpoints (datalayer.Store.Set) and tells the plugins
// that keep per-endpoint state. A Kubernetes informer, or any other source, is
// a datalayer.Source in the user's build.
//
// The file format, shared with llm-d's file discovery:
//
//	endpoints:
//	- name: vllm-0
//	  address: 10.0.0.1
//	  port: 8000          # a number or a string; omitted: the pool's target ports
//	  labels:
//	    llm-d.ai/engine-type: vllm
//
// A file that cannot be read or parsed, is over maxBytes, or holds an
// invalid entry (no name, an address that is not an IP, a port out of range,
// a duplicate name) is rejected as a whole: at start-up it is an error; on a
// reload the last good set stays in force, the error is logged once and
// counted (File.Stats). A file that vanishes keeps the last set too.
package discovery
