package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the writer's goroutine and the test.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogWriter checks that lines reach the output in order, within the
// flush interval, in fewer writes than lines, and that Close writes the rest.
func TestLogWriter(t *testing.T) {
	out := &syncBuffer{}
	w := newLogWriter(out)
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("line %d\n", i)
		w.Write([]byte(line))
		want.WriteString(line)
	}
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != want.String() {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s the output holds %d bytes of %d", len(out.String()), want.Len())
		}
		time.Sleep(logFlushInterval)
	}
	if out.writes >= 100 {
		t.Fatalf("%d writes for 1000 lines, want them batched", out.writes)
	}
	w.Write([]byte("last\n"))
	w.Close()
	if !strings.HasSuffix(out.String(), "last\n") {
		t.Fatal("Close did not write the buffered line")
	}
}
