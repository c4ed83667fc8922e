// Command floor is the floor under fence's one-client figure: an HTTP server
// with nothing in it but Go's net/http and, per request, one write of a
// small record into a file of fixed size (sparse, as fence's log segments
// are) and one fdatasync. It answers the routes that the peer benchmark's
// fence client sends (acquire, a fenced PUT, release, /readyz) with bodies
// of the shape fence sends, so that the peer benchmark measures it as it
// measures fence. bench/floor.sh runs it next to fence.
//
//	go run ./bench/floor --listen 127.0.0.1:17702 --file /tmp/floor.seg [--nosync]
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:17702", "loopback address to listen on")
	path := flag.String("file", "", "the file written and synced (created, 64 MiB, sparse)")
	nosync := flag.Bool("nosync", false, "write without fdatasync: the same server without the disk")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Fatalf("floor: --listen %q: want a loopback address", *listen)
	}
	if *path == "" {
		log.Fatal("floor: --file is required")
	}
	f, err := os.OpenFile(*path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err == nil {
		err = f.Truncate(64 << 20)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		log.Fatalf("floor: %v", err)
	}
	l := &logFile{f: f, sync: !*nosync, record: make([]byte, 150)}
	http.HandleFunc("/readyz", func(http.ResponseWriter, *http.Request) {})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		token, err := l.commit()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/acquire"):
			fmt.Fprintf(w, `{"resource":"r","holder":"h","token":%d,"ttl_ms":10000,"expires_at":%q}`+"\n",
				token, time.Now().Add(10*time.Second).UTC().Format(time.RFC3339Nano))
		case strings.HasSuffix(r.URL.Path, "/release"):
			fmt.Fprintln(w, `{"resource":"r","released":true}`)
		default:
			fmt.Fprintf(w, `{"resource":"r","key":"v","revision":%d,"fence":%d}`+"\n", token, token)
		}
	})
	log.Fatal(http.ListenAndServe(*listen, nil))
}

// logFile appends a record per commit, one commit at a time.
type logFile struct {
	f      *os.File
	sync   bool
	record []byte

	mu  sync.Mutex
	off int64
	n   int64
}

// commit writes a record and syncs it; it returns the commit's number.
func (l *logFile) commit() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off+int64(len(l.record)) > 64<<20 {
		l.off = 0
	}
	if _, err := l.f.WriteAt(l.record, l.off); err != nil {
		return 0, err
	}
	if l.sync {
		if err := datasync(l.f); err != nil {
			return 0, err
		}
	}
	l.off += int64(len(l.record))
	l.n++
	return l.n, nil
}
