//go:build race

package kvindex

// raceEnabled: under the race detector sync.Pool drops items at random, so
// allocation counts that rely on it are not checked.
const raceEnabled = true
