// Package datalayer holds what the picker knows about model-server endpoints:
// the Endpoint snapshot (identity, labels, rank, Metrics and typed attributes)
// that every scheduling plugin reads.
//
// An *Endpoint handed to plugins is an immutable snapshot: the data layer
// publishes a new value when metrics change and never mutates a published one,
// so plugins may read it from any goroutine without locks and without copying.
// Discovery and scraping build and replace snapshots; they arrive in their own
// files.
package datalayer
