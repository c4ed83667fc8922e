// Package e2e tests the fence binary as users run it: built from cmd/fence,
// started as a separate process on a loopback port, stopped with signals and
// killed with SIGKILL mid-load. It holds tests only.
package e2e
