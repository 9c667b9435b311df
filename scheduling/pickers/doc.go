// Package pickers holds the stock scheduling pickers: max-score-picker (the
// highest weighted total, ties broken at random), random-picker and
// weighted-random-picker (probability proportional to the total).
//
// Each picker returns the primary endpoint first, then up to
// MaxNumOfEndpoints − 1 fallbacks, all distinct. Randomness comes from the
// source in plugins.Deps handed to Init, so a run with a fixed seed is
// reproducible; a picker whose Init was never called (a struct built directly
// in Go) uses a source seeded with 1. Pickers are safe for concurrent use;
// with MaxNumOfEndpoints 1 they allocate only their one-element result.
package pickers
