// Package enginebench holds only benchmarks: the commit latency and
// throughput of the embedded engines fence was built with (journal, its
// engine; bbolt, the one before; pebble, the other candidate, kept here
// only), at 1, 16 and 64 concurrent changes, next to the machine's raw
// fdatasync in the same run. Run:
//
//	go test -run '^$' -bench . -count 5 ./internal/enginebench/ | tee engines.txt
//	benchstat engines.txt
package enginebench
