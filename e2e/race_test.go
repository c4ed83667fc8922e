//go:build race

package e2e

// raceEnabled: the tests run with -race, and so does the binary they build.
const raceEnabled = true
