// Package benchmarks implements the pinned performance scenarios of
// BENCHMARKS.md (shared/BENCHMARKS.md in the project's shared folder) as Go
// benchmarks with exactly the names given there, so figures compare across
// versions and against the reference (llm-d-router v0.10):
//
//	go test -run '^$' -bench . -benchmem -count 5 ./benchmarks/
//
// It holds no library code; everything is in the _test files.
package benchmarks
