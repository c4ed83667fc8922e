//go:build race

package check_test

// raceEnabled: the tests run with -race, which makes the large histories
// slow; they check smaller ones.
const raceEnabled = true
