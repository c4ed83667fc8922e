// Package sse reads and writes Server-Sent Events streams
// (text/event-stream), as the WHATWG HTML standard defines them: lines
// ending in CR, LF or CRLF; "field: value" lines; events ended by a blank
// line; comments starting with ':'.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ContentType is the media type of an event stream.
const ContentType = "text/event-stream"

// Event is one event of a stream.
type Event struct {
	// ID is the stream's last event ID once this event is dispatched: the
	// event's own "id" field, or the one before it if it has none.
	ID string
	// Type is the "event" field; "" means "message".
	Type string
	// Data is the "data" fields joined by "\n".
	Data string
}

// MaxLine is the longest line a Reader accepts, in bytes.
const MaxLine = 1 << 20

// ErrLineTooLong means a stream has a line longer than MaxLine.
var ErrLineTooLong = errors.New("sse: line too long")

// Reader reads the events of a stream.
type Reader struct {
	r      *bufio.Reader
	lastID string
	retry  time.Duration
	start  bool // the next byte is the stream's first
	cr     bool // the last line ended in CR: a LF right after it is part of that end
}

// NewReader returns a Reader of the stream r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 4096), start: true}
}

// Retry returns the reconnection delay the stream last set with a "retry"
// field, 0 if none.
func (r *Reader) Retry() time.Duration { return r.retry }

// LastID returns the stream's last event ID: the last "id" field read.
func (r *Reader) LastID() string { return r.lastID }

// Next returns the next event. An event that the stream ends before its
// blank line is discarded, as the standard says: Next returns io.EOF (or
// the read error) instead. A line over MaxLine is ErrLineTooLong.
func (r *Reader) Next() (Event, error) {
	var typ string
	var data strings.Builder
	hasData := false
	for {
		line, err := r.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if !hasData {
				typ = "" // nothing to dispatch: the buffers reset
				continue
			}
			return Event{ID: r.lastID, Type: typ, Data: data.String()}, nil
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 63); err == nil && isDigits(value) {
				r.retry = time.Duration(min(ms, uint64(24*time.Hour/time.Millisecond))) * time.Millisecond
			}
		}
	}
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// line returns the next line without its end. At the stream's start it
// skips one UTF-8 byte order mark.
func (r *Reader) line() ([]byte, error) {
	var line []byte
	for {
		b, err := r.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				// A last line without its end: the event it belongs to is
				// never dispatched, so it does not matter.
				return nil, io.EOF
			}
			return nil, err
		}
		if r.start {
			r.start = false
			if b == 0xEF {
				if bom, err := r.r.Peek(2); err == nil && bom[0] == 0xBB && bom[1] == 0xBF {
					r.r.Discard(2)
					continue
				}
			}
		}
		if r.cr {
			r.cr = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			r.cr = true
			return line, nil
		}
		if len(line) >= MaxLine {
			return nil, ErrLineTooLong
		}
		line = append(line, b)
	}
}

// Write writes e to w as one event: an "id" line if e.ID is not "", an
// "event" line if e.Type is not "", and one "data" line per line of e.Data.
// An ID or a type with a line break or a NUL cannot be sent and is an error.
func Write(w io.Writer, e Event) error {
	b, err := Encode(e)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Encode returns e as Write writes it: a server that sends one event on
// many streams encodes it once.
func Encode(e Event) ([]byte, error) {
	var b bytes.Buffer
	if e.ID != "" {
		if strings.ContainsAny(e.ID, "\r\n\x00") {
			return nil, fmt.Errorf("sse: event ID %q has a line break or a NUL", e.ID)
		}
		b.WriteString("id: " + e.ID + "\n")
	}
	if e.Type != "" {
		if strings.ContainsAny(e.Type, "\r\n") {
			return nil, fmt.Errorf("sse: event type %q has a line break", e.Type)
		}
		b.WriteString("event: " + e.Type + "\n")
	}
	data := strings.ReplaceAll(strings.ReplaceAll(e.Data, "\r\n", "\n"), "\r", "\n")
	for _, l := range strings.Split(data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	return b.Bytes(), nil
}

// WriteRetry writes a "retry" field that sets the client's reconnection
// delay.
func WriteRetry(w io.Writer, d time.Duration) error {
	_, err := fmt.Fprintf(w, "retry: %d\n\n", d.Milliseconds())
	return err
}

// WriteComment writes a comment line, such as a heartbeat that keeps
// proxies from closing an idle stream. A comment with a line break is an
// error.
func WriteComment(w io.Writer, text string) error {
	if strings.ContainsAny(text, "\r\n") {
		return fmt.Errorf("sse: comment %q has a line break", text)
	}
	_, err := io.WriteString(w, ": "+text+"\n")
	return err
}
