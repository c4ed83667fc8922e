// Package bench is the load generator behind `fence bench`: a closed-loop
// benchmark that drives a running fence server over its v1 HTTP API, records
// the latency of every step in log-linear histograms, counts every error by
// its problem code, and checks in process that the fencing guarantees held
// while it ran.
//
// Run executes one workload (Cycle, Write or Contended) with Config.Clients
// concurrent clients, each on its own HTTP connection, and returns a Report.
// Histogram is the allocation-free latency histogram it uses; it is exported
// because it is useful on its own.
//
// Report.WriteText renders a Report for people; its JSON encoding is the
// machine-readable form. For plots, a Report also has its Timeline (the
// measured time cut into at most MaxIntervals intervals: operations, errors
// and latency quantiles per step in each) and the latency Histograms of the
// steps, which the JSON form leaves out; WriteHTML draws them in the
// self-contained page of fence bench --report. Apart from that the package
// writes nothing: live progress goes to Config.Progress.
//
// The package is not a client library for fence: it speaks just enough of
// the HTTP API for its three workloads, on connections of its own.
package bench
