package history

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Writer writes Ops and Faults as JSON lines. It is safe for concurrent use:
// each record is written with a single Write call on the underlying writer,
// so lines never interleave. It does not buffer or sync; wrap the io.Writer
// (and flush or fsync it) as durability requires.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteOp writes op as one JSON line.
func (w *Writer) WriteOp(op Op) error {
	if len(op.Writes) == 0 {
		op.Writes = nil
	}
	return w.writeLine(op)
}

// WriteFault writes f as one JSON line.
func (w *Writer) WriteFault(f Fault) error {
	if f.Kind == "" {
		return fmt.Errorf("history: fault without a kind")
	}
	return w.writeLine(f)
}

func (w *Writer) writeLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
