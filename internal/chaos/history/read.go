package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Read parses a history: one JSON object per line, blank lines ignored. A line
// with a "fault" member is a Fault; every other line is an Op. It returns the
// ops and the faults in the order they were read.
//
// Read rejects, naming the line: malformed JSON, an Op without a known kind
// or outcome, an Op id seen before, a Fault without a kind. Unknown members
// are ignored, so newer writers can add some.
func Read(r io.Reader) (ops []Op, faults []Fault, err error) {
	br := bufio.NewReader(r)
	seen := make(map[int64]int) // op id -> line
	for line := 1; ; line++ {
		b, rerr := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			op, f, isFault, perr := parseLine(b)
			if perr != nil {
				return nil, nil, fmt.Errorf("history: line %d: %w", line, perr)
			}
			if isFault {
				faults = append(faults, f)
			} else {
				if prev, dup := seen[op.ID]; dup {
					return nil, nil, fmt.Errorf("history: line %d: op id %d already used on line %d", line, op.ID, prev)
				}
				seen[op.ID] = line
				ops = append(ops, op)
			}
		}
		if rerr == io.EOF {
			return ops, faults, nil
		}
		if rerr != nil {
			return nil, nil, fmt.Errorf("history: line %d: %w", line, rerr)
		}
	}
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
