//go:build !race

package e2e

// raceEnabled: the tests run without -race (benchmarks), and so does the binary they build.
const raceEnabled = false
