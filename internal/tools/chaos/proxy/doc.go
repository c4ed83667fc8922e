// Package proxy is a fault-injecting TCP proxy for loopback tests: the piece
// of `fence chaos` that sits between HTTP clients and a fence server and puts
// network faults between them, on kernels without netem.
//
// A Proxy listens on one address and forwards every accepted connection to an
// upstream address, copying bytes both ways. Faults are switched on and off at
// run time and act on every connection, existing and new:
//
//   - SetLatency delays each chunk of bytes, in either direction, by a fixed
//     duration plus or minus a random jitter; the order of the bytes within a
//     connection is kept (a chunk is never delivered before an earlier one).
//   - Blackhole is a partition: connections are still accepted, but nothing
//     is forwarded in either direction. Bytes read meanwhile are held in a
//     small buffer per direction, and once it is full the proxy stops reading,
//     so senders block on full kernel buffers as they would across a
//     partition. When the blackhole ends, every connection that lived through
//     it is reset and its held bytes are dropped; new connections work again.
//   - Refuse closes each new connection at once, with a reset.
//   - ResetAll resets every open connection now.
//   - SetUpstream sends new connections to another address (the server was
//     restarted on another port); existing connections keep theirs.
//
// Half-closes are passed on (when one side ends its stream, the proxy ends
// the same direction towards the other side), and an error on one side, such
// as a reset, resets the other. Close stops the proxy and waits for all its
// goroutines.
//
// It is not a network emulator. Faults act on the byte stream, not on
// packets: there is no packet loss, duplication or reordering (TCP would hide
// them anyway), no bandwidth limit, and a "chunk" is whatever one read
// returned. During a blackhole clients still complete the TCP handshake with
// the proxy, unlike a real partition where the SYN is lost; they find out only
// through their own timeouts. It knows nothing of the protocol it carries,
// is meant for 127.0.0.1, and is not for production traffic.
package proxy
