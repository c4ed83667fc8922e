package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServe_RefusesADamagedJournal grants and writes ten times, flips one
// byte in the middle of the log, and checks that fence serve refuses to
// start, naming the segment and the offset, rather than serve without the
// records after the damage: that restored a released lease, lost the
// writes after it and issued their tokens a second time.
func TestServe_RefusesADamagedJournal(t *testing.T) {
	data := t.TempDir()
	srv := start(t, data)
	for i := 1; i <= 10; i++ {
		var l lease
		if code := call(t, "POST", srv.URL+"/v1/locks/r/acquire", `{"holder":"A","ttl_ms":60000}`, nil, &l); code != 200 || l.Token != uint64(i) {
			t.Fatalf("acquire %d: %d %+v", i, code, l)
		}
		tok := fmt.Sprint(l.Token)
		if code := call(t, "PUT", srv.URL+"/v1/kv/r/k"+tok, "v"+tok, map[string]string{"Fencing-Token": tok}, nil); code != 200 {
			t.Fatalf("PUT k%s: %d", tok, code)
		}
		if code := call(t, "POST", srv.URL+"/v1/locks/r/release", `{"token":`+tok+`}`, nil, nil); code != 200 {
			t.Fatalf("release %s: %d", tok, code)
		}
	}
	srv.kill()

	segs, err := filepath.Glob(filepath.Join(data, "journal", "log-*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment: %v", err)
	}
	seg := segs[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	off := end / 2
	b[off] ^= 0x01
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--data", data, "--listen", "127.0.0.1:0").CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("fence serve on a damaged journal: %v (%v)\n%s; want it to refuse to start", err, ctx.Err(), out)
	}
	for _, want := range []string{filepath.Base(seg), "is damaged at offset", "fence bump --data"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("fence serve on a damaged journal said:\n%s\nwant it to say %q", out, want)
		}
	}
	if strings.Contains(string(out), "fence serving") {
		t.Fatalf("fence serve served from a damaged journal:\n%s", out)
	}
}
