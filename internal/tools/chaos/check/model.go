package check

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// The model of fenced storage that the linearizable checker hands to
// porcupine. It is partitioned by resource: the state of one resource is the
// values of its keys plus its fence. Reads must see the current value; an
// accepted write needs token >= fence and then sets the fence; a fenced write
// needs token < fence and changes nothing; a grant of token T raises the fence
// to T (the built-in store does that before the grant is acknowledged).
//
// A txn enters the partition of each resource it writes as one write of that
// resource's keys with that resource's token and the txn's times and outcome.
// The atomicity of a txn across resources is therefore not checked.

// linKind is the kind of a model operation.
type linKind byte

const (
	linRead    linKind = iota + 1
	linWrite           // a write, or the writes of one txn in one resource
	linGrant           // an acknowledged grant: the fence rises to its token
	linRestore         // a backup restored: the state becomes the one recorded
)

// kv is one key written.
type kv struct{ key, value string }

// linInput is the Input of a porcupine.Operation.
type linInput struct {
	resource string
	kind     linKind
	token    uint64
	key      string   // linRead
	writes   []kv     // linWrite; linRestore: the keys restored, "" at revision 0 absent
	revs     []uint64 // linRestore: the revision of each of writes
	txn      bool
	// strict says that a fenced linWrite must be explained by this
	// resource's fence. It is false for the other resources of a fenced
	// multi-resource txn, which another resource's fence may have rejected,
	// and after a grant of unknown outcome on the resource (see linHistory).
	strict bool
}

// linOutput is the Output of a porcupine.Operation.
type linOutput struct {
	outcome history.Outcome // OK, or for a linWrite also Fenced or Unknown
	value   string          // linRead: the value read
	rev     uint64          // linRead: the revision read; linWrite: the revision given
}

// keyState is the value of one key.
type keyState struct {
	value string
	// rev is the value's revision; when revUnknown, a bound below it.
	rev uint64
	// revUnknown marks a value written by a write whose outcome is
	// unknown, so whose revision is not known until a read sees it. It is
	// higher than every revision known when the write was applied.
	revUnknown bool
}

// linState is the state of one resource. Its keys map is never modified once
// the state exists: steps copy it.
type linState struct {
	fence uint64
	// maxRev is the highest revision known to be assigned: an accepted
	// write must have a higher one, since revisions grow store-wide.
	maxRev uint64
	keys   map[string]keyState // absent keys are absent
}

func (st linState) withKeys(fn func(map[string]keyState)) linState {
	keys := make(map[string]keyState, len(st.keys)+1)
	for k, v := range st.keys {
		keys[k] = v
	}
	fn(keys)
	st.keys = keys
	return st
}

// apply returns st after the accepted write in; rev 0 means not known.
func (st linState) apply(in *linInput, rev uint64) linState {
	ks := keyState{rev: rev}
	if rev == 0 {
		ks = keyState{rev: st.maxRev, revUnknown: true}
	}
	st = st.withKeys(func(keys map[string]keyState) {
		for _, w := range in.writes {
			ks.value = w.value
			keys[w.key] = ks
		}
	})
	st.fence = in.token
	st.maxRev = max(st.maxRev, rev)
	return st
}

func linStep(s, i, o any) []any {
	st, in, out := s.(linState), i.(*linInput), o.(linOutput)
	switch in.kind {
	case linRead:
		ks, present := st.keys[in.key]
		switch {
		case !present:
			if out.value == "" && out.rev == 0 {
				return []any{st}
			}
		case ks.value != out.value:
		case !ks.revUnknown:
			if ks.rev == out.rev {
				return []any{st}
			}
		case out.rev > ks.rev:
			// The first read of a value written by an unknown write
			// learns its revision.
			st = st.withKeys(func(keys map[string]keyState) { keys[in.key] = keyState{value: out.value, rev: out.rev} })
			st.maxRev = max(st.maxRev, out.rev)
			return []any{st}
		}
		return nil
	case linGrant:
		if in.token < st.fence {
			return nil
		}
		st.fence = in.token
		return []any{st}
	case linRestore:
		// What the restore brought back is checked against the reads
		// before it (see checkLostWrites); from here on it is the state.
		restored := linState{fence: in.token, keys: make(map[string]keyState, len(in.writes))}
		for i, w := range in.writes {
			restored.maxRev = max(restored.maxRev, in.revs[i])
			if w.value != "" || in.revs[i] != 0 {
				restored.keys[w.key] = keyState{value: w.value, rev: in.revs[i]}
			}
		}
		return []any{restored}
	case linWrite:
		switch out.outcome {
		case history.OK:
			if in.token < st.fence || (out.rev != 0 && out.rev <= st.maxRev) {
				return nil
			}
			return []any{st.apply(in, out.rev)}
		case history.Fenced:
			if !in.strict || in.token < st.fence {
				return []any{st} // a rejected write leaves no trace
			}
			return nil
		case history.Unknown:
			if in.token < st.fence {
				return []any{st} // could not have been applied
			}
			return []any{st, st.apply(in, 0)} // applied, or not
		}
	}
	return nil
}

func linEqual(a, b any) bool {
	x, y := a.(linState), b.(linState)
	if x.fence != y.fence || x.maxRev != y.maxRev || len(x.keys) != len(y.keys) {
		return false
	}
	for k, v := range x.keys {
		if w, ok := y.keys[k]; !ok || w != v {
			return false
		}
	}
	return true
}

var hashSeed = maphash.MakeSeed()

func linHash(s any) uint64 {
	st := s.(linState)
	h := st.fence*0x9E3779B97F4A7C15 ^ st.maxRev*0xC2B2AE3D27D4EB4F
	for k, v := range st.keys {
		x := maphash.String(hashSeed, k)*31 ^ maphash.String(hashSeed, v.value) ^ v.rev*0x165667B19E3779F9
		if v.revUnknown {
			x ^= 2
		}
		h += x // the order of keys must not matter
	}
	return h
}

func short(s string) string {
	const n = 24
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", s[:n])
}

func describeOp(i, o any) string {
	in, out := i.(*linInput), o.(linOutput)
	switch in.kind {
	case linRead:
		if out.value == "" && out.rev == 0 {
			return fmt.Sprintf("read %s -> absent", short(in.key))
		}
		return fmt.Sprintf("read %s -> %s @%d", short(in.key), short(out.value), out.rev)
	case linGrant:
		return fmt.Sprintf("grant token %d", in.token)
	case linRestore:
		ws := make([]string, len(in.writes))
		for j, w := range in.writes {
			ws[j] = fmt.Sprintf("%s=%s@%d", short(w.key), short(w.value), in.revs[j])
		}
		return fmt.Sprintf("restore fence %d {%s}", in.token, strings.Join(ws, ", "))
	}
	ws := make([]string, len(in.writes))
	for j, w := range in.writes {
		ws[j] = short(w.key) + "=" + short(w.value)
	}
	what := "write"
	if in.txn {
		what = "txn"
	}
	s := fmt.Sprintf("%s %s token %d -> %s", what, strings.Join(ws, ", "), in.token, out.outcome)
	if out.outcome == history.OK {
		s += fmt.Sprintf(" @%d", out.rev)
	}
	if out.outcome == history.Fenced && !in.strict {
		s += " (not checked: another resource, or a grant of unknown outcome)"
	}
	return s
}

func describeState(s any) string {
	st := s.(linState)
	fence := fmt.Sprint(st.fence)
	keys := make([]string, 0, len(st.keys))
	for k := range st.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for j, k := range keys {
		v := st.keys[k]
		rev := fmt.Sprint(v.rev)
		if v.revUnknown {
			rev = fmt.Sprintf(">%d?", v.rev)
		}
		keys[j] = fmt.Sprintf("%s=%s@%s", short(k), short(v.value), rev)
	}
	return fmt.Sprintf("fence %s, rev>=%d {%s}", fence, st.maxRev, strings.Join(keys, ", "))
}

func describeMeta(m any) string {
	op, ok := m.(*history.Op)
	if !ok || op == nil {
		return ""
	}
	s := fmt.Sprintf("op %d, client %d, %s %s", op.ID, op.Client, op.Kind, op.Outcome)
	if op.Error != "" {
		s += ": " + op.Error
	}
	return s
}

// partitionByResource splits a history made by linHistory, which keeps the
// ops of one resource together.
func partitionByResource(ops []porcupine.Operation) [][]porcupine.Operation {
	var parts [][]porcupine.Operation
	for i := 0; i < len(ops); {
		r := ops[i].Input.(*linInput).resource
		j := i + 1
		for j < len(ops) && ops[j].Input.(*linInput).resource == r {
			j++
		}
		parts = append(parts, ops[i:j:j])
		i = j
	}
	return parts
}

// fencedModel is the model of fenced storage.
func fencedModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition:                 partitionByResource,
		Init:                      func() []any { return []any{linState{}} },
		Step:                      linStep,
		Equal:                     linEqual,
		Hash:                      linHash,
		DescribeOperation:         describeOp,
		DescribeState:             describeState,
		DescribeOperationMetadata: describeMeta,
	}
	return nm.ToModel()
}
