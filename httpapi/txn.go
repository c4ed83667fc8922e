package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/logline"
	"github.com/fence-lock/fence/wire"
)

// txnHandlers binds POST /v1/txn.
var txnHandlers = handlerSet{
	wire.OpTxn: {body: maxTxnBody, serve: (*Handler).txn},
}

// maxTxnBody is the largest body of POST /v1/txn.
const maxTxnBody = 4 << 20

func (s *Handler) txn(c *call) error {
	// A txn that only lacks a fence or has an invalid token comes with
	// its names, which are authorized first: forbidden wins over both.
	t, err := decodeTxn(c.body)
	if t == nil {
		return err
	}
	if err := s.authorizeTxn(c, t); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	rev, err := s.store.Txn(c.r.Context(), t)
	if err != nil {
		return err
	}
	// One line per fenced resource, in byte order of name. An accepted txn
	// raised each fence to its token, which is therefore the last fence.
	if len(t.Fences) > 0 {
		storageWrites.WithLabelValues("txn").Inc()
	}
	for _, res := range slices.Sorted(maps.Keys(t.Fences)) {
		ops := 0
		for _, op := range t.Then {
			if op.Resource == res {
				ops++
			}
		}
		tok := t.Fences[res]
		logline.Log(c.r.Context(), c.s.logger(), slog.LevelInfo, "write accepted",
			slog.String("op", "txn"),
			slog.String(keyResource, res),
			slog.Uint64(keyToken, uint64(tok)),
			slog.Uint64(keyLastFence, uint64(tok)),
			slog.Int("ops", ops),
			slog.Uint64(keyRevision, uint64(rev)))
	}
	c.writeJSON(wire.TxnResponse{Revision: rev})
	return nil
}

// authorizeTxn checks that the caller may write every resource of t's
// fences and ops and read every resource of its compares.
func (s *Handler) authorizeTxn(c *call, t *fence.Txn) error {
	for _, res := range slices.Sorted(maps.Keys(t.Fences)) {
		if err := c.allowed(wire.PermWrite, res); err != nil {
			return err
		}
	}
	for _, op := range t.Then {
		if err := c.allowed(wire.PermWrite, op.Resource); err != nil {
			return err
		}
	}
	for _, cm := range t.If {
		if err := c.allowed(wire.PermRead, cm.Resource); err != nil {
			return err
		}
	}
	return nil
}

// faults keeps, of several errors found in one request, the one that comes
// first in the API's precedence (and of equal ones, the first found).
type faults struct {
	err  error
	rank int
}

func (f *faults) add(err error) {
	if err == nil {
		return
	}
	if r := wire.Rank(err); f.err == nil || r < f.rank {
		f.err, f.rank = err, r
	}
}

// decodeTxn decodes the body of POST /v1/txn:
//
//	{"fences": {resource: token, ...},
//	 "if":   [{"resource", "key", "revision"}, ...],
//	 "then": [{"op": "put"|"delete", "resource", "key", "value"|"value_base64"}, ...]}
//
// Every member is optional. Each compare needs all three members, revision an
// integer >= 0 (0: the key is absent). A put needs exactly one of value and
// value_base64, a delete neither. Of several faults it reports the first in
// the API's order: too_large (a value over fence.MaxValueSize), bad_request,
// fence_required (an op on a resource without an entry in fences), then
// invalid_token (a fence that is not a JSON integer in 1..MaxToken). With
// either of those two, which the API ranks after forbidden, it returns the
// txn as well, its names all valid, so that the caller can check the
// caller's permissions on them first.
func decodeTxn(data []byte) (*fence.Txn, error) {
	if err := checkText(data); err != nil {
		return nil, err
	}
	ms, err := members("txn", data)
	if err != nil {
		return nil, err
	}
	var f faults
	// Unknown members are a bad_request, which a value over the limit beats.
	f.add(unknownMember("txn", ms, "fences", "if", "then"))
	t := &fence.Txn{Fences: map[string]fence.Token{}}
	if v := get(ms, "fences"); v != nil {
		fs, err := membersUpTo("fences", v, fence.MaxTxnEntries, fence.ErrTooLarge)
		f.add(err)
		for _, m := range fs {
			if err := fence.ValidateResource(m.name); err != nil {
				f.add(fmt.Errorf("fences: %w", err))
				continue
			}
			tok, err := jsonToken(fmt.Sprintf("fences[%q]", m.name), m.value)
			f.add(err) // invalid_token, which loses to every fault before it
			t.Fences[m.name] = tok
		}
	}
	if v := get(ms, "if"); v != nil {
		es, err := elements("if", v, fence.MaxTxnEntries)
		f.add(err)
		for i, e := range es {
			c, err := decodeCompare(fmt.Sprintf("if[%d]", i), e)
			f.add(err)
			if err == nil {
				t.If = append(t.If, c)
			}
		}
	}
	if v := get(ms, "then"); v != nil {
		es, err := elements("then", v, fence.MaxTxnEntries)
		f.add(err)
		for i, e := range es {
			op, err := decodeOp(fmt.Sprintf("then[%d]", i), e)
			f.add(err)
			if err == nil {
				t.Then = append(t.Then, op)
			}
		}
	}
	for i, op := range t.Then {
		if _, ok := t.Fences[op.Resource]; !ok {
			f.add(fmt.Errorf("%w: then[%d] writes resource %q, which has no entry in fences", fence.ErrFenceRequired, i, op.Resource))
		}
	}
	switch {
	case f.err == nil:
		return t, nil
	case errors.Is(f.err, fence.ErrFenceRequired), errors.Is(f.err, fence.ErrInvalidToken):
		return t, f.err
	}
	return nil, f.err
}

// decodeCompare decodes {"resource", "key", "revision"}.
func decodeCompare(what string, v json.RawMessage) (fence.Compare, error) {
	var c fence.Compare
	ms, err := members(what, v)
	if err == nil {
		err = unknownMember(what, ms, "resource", "key", "revision")
	}
	if err != nil {
		return c, err
	}
	if c.Resource, c.Key, err = names(what, ms); err != nil {
		return c, err
	}
	r := get(ms, "revision")
	if r == nil {
		return c, badRequest("%s: revision is required", what)
	}
	n, ok := integer(r, 0, math.MaxInt64)
	if !ok {
		return c, badRequest("%s: revision must be an integer >= 0, not %s", what, clip(r))
	}
	c.Rev = fence.Rev(n)
	return c, nil
}

// decodeOp decodes {"op", "resource", "key", "value" | "value_base64"}.
func decodeOp(what string, v json.RawMessage) (fence.Op, error) {
	var op fence.Op
	ms, err := members(what, v)
	if err != nil {
		return op, err
	}
	// A value over the limit is too_large, which comes before every
	// bad_request in the API's order, so it is checked first.
	var val, b64 []byte
	var valErr, b64Err error
	if v := get(ms, "value"); v != nil {
		var s string
		s, valErr = str(what+".value", v)
		val = []byte(s)
	}
	if v := get(ms, "value_base64"); v != nil {
		var s string
		if s, b64Err = str(what+".value_base64", v); b64Err == nil {
			if b64, b64Err = decodeBase64(s); b64Err != nil {
				b64Err = badRequest("%s.value_base64: %v", what, b64Err)
			}
		}
	}
	for _, v := range [][]byte{val, b64} {
		if len(v) > fence.MaxValueSize {
			return op, fmt.Errorf("%w: %s: value is %d bytes, more than %d", fence.ErrTooLarge, what, len(v), fence.MaxValueSize)
		}
	}
	if err := unknownMember(what, ms, "op", "resource", "key", "value", "value_base64"); err != nil {
		return op, err
	}
	k := get(ms, "op")
	if k == nil {
		return op, badRequest("%s: op is required", what)
	}
	kind, err := str(what+".op", k)
	if err != nil {
		return op, err
	}
	if op.Resource, op.Key, err = names(what, ms); err != nil {
		return op, err
	}
	hasVal, hasB64 := get(ms, "value") != nil, get(ms, "value_base64") != nil
	switch op.Kind = fence.OpKind(kind); op.Kind {
	case fence.OpPut:
		switch {
		case hasVal && hasB64:
			return op, badRequest("%s: a put has value or value_base64, not both", what)
		case hasVal:
			op.Value = val
			return op, valErr
		case hasB64:
			op.Value = b64
			return op, b64Err
		default:
			return op, badRequest("%s: a put needs value or value_base64", what)
		}
	case fence.OpDelete:
		if hasVal || hasB64 {
			return op, badRequest("%s: a delete has no value", what)
		}
		return op, nil
	default:
		return op, badRequest("%s: op must be \"put\" or \"delete\", not %q", what, kind)
	}
}

// names decodes and validates the required resource and key members.
func names(what string, ms []member) (resource, key string, err error) {
	r, k := get(ms, "resource"), get(ms, "key")
	if r == nil || k == nil {
		return "", "", badRequest("%s: resource and key are required", what)
	}
	if resource, err = str(what+".resource", r); err != nil {
		return "", "", err
	}
	if err := fence.ValidateResource(resource); err != nil {
		return "", "", fmt.Errorf("%s: %w", what, err)
	}
	if key, err = str(what+".key", k); err != nil {
		return "", "", err
	}
	if err := fence.ValidateKey(key); err != nil {
		return "", "", fmt.Errorf("%s: %w", what, err)
	}
	return resource, key, nil
}

// decodeBase64 decodes standard, padded base64 and nothing else: no line
// breaks (which encoding/base64 skips) and no stray bits in the last byte.
func decodeBase64(s string) ([]byte, error) {
	if bytes.ContainsAny([]byte(s), "\r\n") {
		return nil, errors.New("line breaks are not allowed")
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

// ParseTxn decodes the JSON body of POST /v1/txn with the server's own strict
// rules, so that a client can reject a bad transaction before sending it.
// Errors wrap the fence sentinel of their API code (fence.ErrBadRequest,
// fence.ErrTooLarge, fence.ErrFenceRequired, fence.ErrInvalidToken); with
// the last two the txn is returned as well.
func ParseTxn(data []byte) (*fence.Txn, error) { return decodeTxn(data) }
