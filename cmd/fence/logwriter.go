package main

import (
	"io"
	"sync"
	"time"
)

// logFlushInterval is how long a log line may wait in memory before it is
// written: what a crash (kill -9, a power cut) can lose of the log. The
// data is never at stake: a change is durable before it is answered, and
// its log line is written after.
const logFlushInterval = 10 * time.Millisecond

// logWriter batches log lines into few writes: Write appends to a buffer,
// and a goroutine writes the buffer out every logFlushInterval (or at once
// when it holds logBufferLimit bytes), instead of one write(2) per line on
// the request path. Close writes what is left.
type logWriter struct {
	out io.Writer

	mu    sync.Mutex
	buf   []byte
	spare []byte
	flush chan struct{} // a flush is wanted now
	stopC chan struct{}
	doneC chan struct{}
	once  sync.Once
}

// logBufferLimit is the size at which a flush starts without waiting.
const logBufferLimit = 256 << 10

func newLogWriter(out io.Writer) *logWriter {
	w := &logWriter{out: out, flush: make(chan struct{}, 1), stopC: make(chan struct{}), doneC: make(chan struct{})}
	go w.loop()
	return w
}

// Write implements io.Writer; it never fails (a failed write to the log's
// destination loses those lines, as it would have before).
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	full := len(w.buf) >= logBufferLimit
	w.mu.Unlock()
	if full {
		select {
		case w.flush <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (w *logWriter) loop() {
	defer close(w.doneC)
	t := time.NewTicker(logFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.flush:
		case <-w.stopC:
			w.writeOut()
			return
		}
		w.writeOut()
	}
}

// writeOut writes the buffered lines, swapping buffers so that Write is
// not held up by the write.
func (w *logWriter) writeOut() {
	w.mu.Lock()
	b := w.buf
	w.buf = w.spare[:0]
	w.mu.Unlock()
	if len(b) > 0 {
		w.out.Write(b)
	}
	w.mu.Lock()
	w.spare = b
	w.mu.Unlock()
}

// Close writes what is buffered and stops the writer; later writes are
// buffered and lost.
func (w *logWriter) Close() error {
	w.once.Do(func() {
		close(w.stopC)
		<-w.doneC
	})
	return nil
}
