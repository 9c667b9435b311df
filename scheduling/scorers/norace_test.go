//go:build !race

package scorers_test

const raceEnabled = false
