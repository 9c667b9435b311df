//go:build race

package scorers_test

// raceEnabled: the race detector adds allocations of its own.
const raceEnabled = true
