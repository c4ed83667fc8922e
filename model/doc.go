// Package model is fence's protocol written as a model for the Spin model
// checker (fence.pml), and the test that checks it exhaustively.
//
// The model has two servers that share one durable store, three clients and
// two resources. It covers grants, renewals, expiries, releases, hand-offs
// to waiters, revokes, fenced writes, crashes and restarts, and leader
// takeovers under the writer epoch. Clients may pause at any point and come
// back with their old tokens, and a replaced leader may keep serving from
// stale memory. Every invariant of docs/DESIGN.md that a model can state is
// an assertion, checked in every reachable state. TestModel runs Spin and a
// C compiler on it. The model must pass; with the fence check or the epoch
// check removed it must fail; and each scenario the properties depend on
// must be reachable. README.md says what is modelled and what is not, and
// how to run it by hand.
//
// It is not code that fence runs, and it checks the design, not the Go
// code: each step of the model names the functions it stands for, so that
// the two change together, and the tests of the other packages check the
// code.
package model
