package httpapi

import (
	"fmt"
	"maps"

	"github.com/fence-lock/fence/wire"
)

// The handlers of the API's operations live by part of the API, each file
// with its share of the binding and the decoders of its bodies: meta.go
// (health, readiness, metrics, documents, the dashboard), locks.go,
// kv.go, fences.go, txn.go and watch.go. A new operation is a row of
// wire.Routes, a line of its file's binding and its handler there.
//
// Each handler checks the request in the API's order of precedence
// (too_large, bad_request, fence_required, invalid_token) before it calls the
// Locker or the Store, which answer the rest (token_not_issued, fenced,
// precondition_failed, not_found). So a rejected request never reaches a
// mutating method.

// handler is how the server answers one operation. Before serve is called,
// the request is admitted (authenticated, rate limited, authorised as its
// row of wire.Routes says), its body read into call.body (at most body
// bytes: too_large past that; 0: not read), and the path's resource and
// key decoded into call.resource and call.key (bad_request if they are not
// valid names).
type handler struct {
	body  int64
	serve func(*Handler, *call) error
}

// handlerSet binds operations of wire.Routes to their handlers.
type handlerSet map[*wire.Op]handler

// handlers are the handlers of every operation. A HEAD without a handler of
// its own is answered by its route's GET handler (net/http drops the body).
var handlers = joinHandlers(metaHandlers, lockHandlers, kvHandlers, fenceHandlers, txnHandlers, watchHandlers)

// joinHandlers joins sets, and panics if two bind the same operation.
func joinHandlers(sets ...handlerSet) handlerSet {
	all := handlerSet{}
	for _, set := range sets {
		for op := range set {
			if _, dup := all[op]; dup {
				panic(fmt.Sprintf("httpapi: %s bound twice", op.ID))
			}
		}
		maps.Copy(all, set)
	}
	return all
}

// prepare reads the body h reads and decodes the path's parameters into c.
func (c *call) prepare(h handler, m match) error {
	if h.body > 0 {
		body, err := c.readBody(h.body)
		if err != nil {
			return err
		}
		c.body = body
	}
	res, key, err := m.params()
	c.resource, c.key, c.rawKey = res, key, m.key
	return err
}
