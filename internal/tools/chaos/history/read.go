package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Read parses a history: one JSON object per line, blank lines ignored. A line
// with a "fault" member is a Fault; every other line is an Op. It returns the
// ops and the faults in the order they were read.
//
// Read rejects, naming the line: malformed JSON, an Op without a known kind
// or outcome, an Op id seen before, a Fault without a kind. Unknown members
// are ignored, so newer writers can add some.
//
// Read holds the whole history in memory; Reader reads one line at a time.
func Read(r io.Reader) (ops []Op, faults []Fault, err error) {
	hr := NewReader(r)
	seen := make(map[int64]int) // op id -> line
	for {
		e, err := hr.Next()
		if errors.Is(err, io.EOF) {
			return ops, faults, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if e.IsFault {
			faults = append(faults, e.Fault)
			continue
		}
		if prev, dup := seen[e.Op.ID]; dup {
			return nil, nil, fmt.Errorf("history: line %d: op id %d already used on line %d", e.Line, e.Op.ID, prev)
		}
		seen[e.Op.ID] = e.Line
		ops = append(ops, e.Op)
	}
}

// Entry is one line of a history: an Op, or a Fault when IsFault.
type Entry struct {
	Op      Op
	Fault   Fault
	IsFault bool
	Line    int // the line's number, from 1
}

// Reader reads a history one line at a time, so that a history larger than
// memory can be judged in passes. It checks each line as Read does, but it
// keeps nothing of the lines it returned, so it does not reject an op id
// seen before.
type Reader struct {
	br   *bufio.Reader
	line int
	// names interns resources and keys: a long history repeats a few.
	names map[string]string
}

// maxNames bounds the strings a Reader interns.
const maxNames = 4096

// NewReader returns a Reader of the history in r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), names: make(map[string]string)}
}

// Next returns the next op or fault, skipping blank lines. At the end of the
// history it returns io.EOF; an error that names the line otherwise.
func (r *Reader) Next() (Entry, error) {
	for {
		b, rerr := r.br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return Entry{}, fmt.Errorf("history: line %d: %w", r.line+1, rerr)
		}
		if len(b) == 0 && rerr == io.EOF {
			return Entry{}, io.EOF
		}
		r.line++
		if len(bytes.TrimSpace(b)) == 0 {
			if rerr == io.EOF {
				return Entry{}, io.EOF
			}
			continue
		}
		op, f, isFault, err := parseLine(b)
		if err != nil {
			return Entry{}, fmt.Errorf("history: line %d: %w", r.line, err)
		}
		if !isFault {
			r.intern(&op)
		}
		return Entry{Op: op, Fault: f, IsFault: isFault, Line: r.line}, nil
	}
}

// intern makes op share the strings that repeat from line to line.
func (r *Reader) intern(op *Op) {
	op.Kind = Kind(internConst(string(op.Kind), string(KindAcquire), string(KindRead), string(KindWrite), string(KindTxn), string(KindRelease), string(KindRestore)))
	op.Outcome = Outcome(internConst(string(op.Outcome), string(OK), string(Fenced), string(Rejected), string(Fail), string(Unknown)))
	op.Resource, op.Key = r.name(op.Resource), r.name(op.Key)
	for i := range op.Writes {
		op.Writes[i].Resource, op.Writes[i].Key = r.name(op.Writes[i].Resource), r.name(op.Writes[i].Key)
	}
}

func internConst(s string, consts ...string) string {
	for _, c := range consts {
		if s == c {
			return c
		}
	}
	return s
}

func (r *Reader) name(s string) string {
	if n, ok := r.names[s]; ok {
		return n
	}
	if len(r.names) < maxNames {
		r.names[s] = s
	}
	return s
}

// parseLine decodes one non-blank line.
func parseLine(b []byte) (op Op, f Fault, isFault bool, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return op, f, false, jsonError(err)
	}
	if members == nil {
		return op, f, false, errors.New("null is not an op or a fault")
	}
	if _, isFault = members["fault"]; isFault {
		if err := json.Unmarshal(b, &f); err != nil {
			return op, f, true, jsonError(err)
		}
		if f.Kind == "" {
			return op, f, true, errors.New(`fault: empty "fault" kind`)
		}
		return op, f, true, nil
	}
	if err := json.Unmarshal(b, &op); err != nil {
		return op, f, false, jsonError(err)
	}
	if !op.Kind.Valid() {
		return op, f, false, fmt.Errorf("op %d: unknown kind %q", op.ID, op.Kind)
	}
	if !op.Outcome.Valid() {
		return op, f, false, fmt.Errorf("op %d: unknown outcome %q", op.ID, op.Outcome)
	}
	if len(op.Writes) == 0 {
		op.Writes = nil // "writes": [] and no member read the same
	}
	return op, f, false, nil
}

// jsonError makes encoding/json's errors say where in the line they are.
func jsonError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("not a JSON object: %w", err)
		}
		return fmt.Errorf("member %q: %w", te.Field, err)
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

// ReadFile calls fn for each entry of the history file at path, in order,
// until fn returns an error, which ReadFile returns.
func ReadFile(path string, fn func(*Entry) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := NewReader(f)
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
}
