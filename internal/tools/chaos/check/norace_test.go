//go:build !race

package check_test

// raceEnabled: the tests run without -race.
const raceEnabled = false
