package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, stream string) ([]Event, *Reader) {
	t.Helper()
	r := NewReader(strings.NewReader(stream))
	var evs []Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return evs, r
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		evs = append(evs, e)
	}
}

func TestReader(t *testing.T) {
	for _, c := range []struct {
		name, stream string
		want         []Event
	}{
		{"one", "id: 1\nevent: granted\ndata: {}\n\n", []Event{{ID: "1", Type: "granted", Data: "{}"}}},
		{"multi-line data", "data: a\ndata:b\ndata\n\n", []Event{{Data: "a\nb\n"}}},
		{"CRLF", "id: 7\r\ndata: x\r\n\r\n", []Event{{ID: "7", Data: "x"}}},
		{"CR", "id: 7\rdata: x\r\rdata: y\r\r", []Event{{ID: "7", Data: "x"}, {ID: "7", Data: "y"}}},
		{"BOM", "\xEF\xBB\xBFdata: x\n\n", []Event{{Data: "x"}}},
		{"second BOM is a field", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", nil},
		{"comments and unknown fields", ": hi\nfoo: bar\ndata: x\n\n", []Event{{Data: "x"}}},
		{"no data, no event", "id: 3\nevent: e\n\ndata: y\n\n", []Event{{ID: "3", Data: "y"}}},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\n", []Event{{ID: "1", Data: "a"}, {ID: "1", Data: "b"}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x00\ndata: b\n\n", []Event{{ID: "1", Data: "a"}, {ID: "1", Data: "b"}}},
		{"empty id resets", "id: 1\ndata: a\n\nid\ndata: b\n\n", []Event{{ID: "1", Data: "a"}, {Data: "b"}}},
		{"only one space stripped", "data:  x\n\n", []Event{{Data: " x"}}},
		{"unterminated event dropped", "data: a\n\ndata: b\n", []Event{{Data: "a"}}},
		{"empty", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _ := readAll(t, c.stream)
			if len(got) != len(c.want) {
				t.Fatalf("events %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("event %d = %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestRetry(t *testing.T) {
	_, r := readAll(t, "retry: 1500\n\nretry: x\n\nretry: -1\n\n")
	if r.Retry() != 1500*time.Millisecond {
		t.Errorf("Retry = %s, want 1.5s", r.Retry())
	}
}

func TestLineTooLong(t *testing.T) {
	r := NewReader(strings.NewReader("data: " + strings.Repeat("x", MaxLine) + "\n\n"))
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
}

func TestWriteRead(t *testing.T) {
	var b bytes.Buffer
	evs := []Event{{ID: "s-1", Type: "granted", Data: `{"a":1}`}, {ID: "s-2", Data: "two\nlines\r\nand\rmore"}}
	if err := WriteRetry(&b, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := Write(&b, e); err != nil {
			t.Fatal(err)
		}
		WriteComment(&b, "heartbeat")
	}
	got, r := readAll(t, b.String())
	if len(got) != 2 || got[0] != evs[0] || got[1] != (Event{ID: "s-2", Data: "two\nlines\nand\nmore"}) {
		t.Fatalf("read %q", got)
	}
	if r.Retry() != time.Second {
		t.Errorf("Retry = %s", r.Retry())
	}
}

func TestWriteRefuses(t *testing.T) {
	for _, e := range []Event{{ID: "a\nb"}, {ID: "a\x00"}, {Type: "x\ry"}} {
		if err := Write(io.Discard, e); err == nil {
			t.Errorf("Write(%q) = nil, want an error", e)
		}
	}
	if err := WriteComment(io.Discard, "a\nb"); err == nil {
		t.Error("WriteComment with a line break = nil, want an error")
	}
}

// FuzzReader checks that no stream makes the reader fail other than by
// ending, and that what it reads writes back to the same events.
func FuzzReader(f *testing.F) {
	f.Add([]byte("id: 1\nevent: granted\ndata: {}\n\n"))
	f.Add([]byte("\xEF\xBB\xBFdata: a\r\ndata: b\r\r: c\nretry: 10\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b))
		var evs []Event
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, ErrLineTooLong) {
					t.Fatalf("Next: %v", err)
				}
				return
			}
			evs = append(evs, e)
		}
		var out bytes.Buffer
		for _, e := range evs {
			if err := Write(&out, e); err != nil {
				return // an ID or type that cannot be sent again
			}
		}
		again := NewReader(&out)
		for i, want := range evs {
			e, err := again.Next()
			if want.ID == "" {
				e.ID = "" // Write cannot reset an ID sent before
			}
			if err != nil || e != want {
				t.Fatalf("event %d re-read as %q, %v; want %q", i, e, err, want)
			}
		}
	})
}
