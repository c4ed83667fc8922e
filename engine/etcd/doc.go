// Package etcd is a cluster engine of fence: the lock state and the fenced
// storage of several fence servers, kept in an etcd cluster they share
// (Store, a state.Remote and a state.Elector). One server leads, through an
// etcd election; every commit it makes is one etcd transaction conditional
// on its writer epoch and on the number of the commit before, so a leader
// that was replaced commits nothing, and a commit sent again after an
// unknown outcome applies once.
//
// What it is not: a guard for data the user keeps in etcd (that is package
// guard/etcd), nor a consensus of its own: etcd's Raft is the one.
package etcd
