// Package postgres is a cluster engine of fence: the lock state and the
// fenced storage of several fence servers, kept in a PostgreSQL database
// they share (Store, a state.Remote and a state.Elector), with a synchronous
// standby for durability across a failover. One server leads, through the
// leader row and its lease; every commit is one transaction that first
// checks the writer epoch in that row and keeps it locked until it commits,
// so a leader that was replaced commits nothing.
//
// What it is not: a guard for data the user keeps in PostgreSQL (that is
// package guard/postgres, or guard/sqlguard over database/sql).
package postgres
