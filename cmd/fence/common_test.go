package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// TestAddClientFlags_AddrList checks that --addr and FENCE_ADDR take a list
// of servers, and that a command fails over from one that refuses
// connections to the next.
func TestAddClientFlags_AddrList(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // refused from now on
	list := down + "," + fencetest.NewServer(t, nil)

	status := func(t *testing.T, args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(t.Context(), append([]string{"status", "orders", "-o", "json"}, args...), stdio{strings.NewReader(""), &out, &errOut}); code != 0 {
			t.Fatalf("fence status %s: exit %d, stderr %s", strings.Join(args, " "), code, errOut.String())
		}
		var got struct {
			Resource string `json:"resource"`
			Held     bool   `json:"held"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Resource != "orders" || got.Held {
			t.Fatalf("output %q (%v), want orders, not held", out.String(), err)
		}
	}
	t.Run("Flag", func(t *testing.T) { status(t, "--addr", list) })
	t.Run("Env", func(t *testing.T) {
		t.Setenv("FENCE_ADDR", list)
		status(t)
	})
	t.Run("Bad", func(t *testing.T) {
		for _, bad := range []string{list + ",", down + "," + down, "http://a:7700,a:7700"} {
			if code := run(t.Context(), []string{"status", "orders", "--addr", bad}, stdio{strings.NewReader(""), io.Discard, io.Discard}); code != exitUsage {
				t.Fatalf("fence status --addr %q: exit %d, want %d", bad, code, exitUsage)
			}
		}
	})
	t.Run("Help", func(t *testing.T) {
		var out bytes.Buffer
		run(t.Context(), []string{"status", "--help"}, stdio{strings.NewReader(""), &out, io.Discard})
		if !strings.Contains(out.String(), "separated by commas") {
			t.Fatalf("fence status --help does not say that --addr takes a list:\n%s", out.String())
		}
	})
}

func TestClusterCmd(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	var out bytes.Buffer
	if code := run(t.Context(), []string{"cluster", "--addr", url, "-o", "json"}, stdio{nil, &out, io.Discard}); code != 0 {
		t.Fatalf("fence cluster exited %d", code)
	}
	var st struct {
		Role  string `json:"role"`
		Epoch int    `json:"epoch"`
		Store string `json:"store"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Role != "leader" || st.Epoch != 1 || st.Store != "embedded" {
		t.Fatalf("fence cluster -o json: %s (%v); want the embedded store's leader, epoch 1", out.Bytes(), err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"cluster", "--addr", url}, stdio{nil, &out, io.Discard}); code != 0 || !strings.Contains(out.String(), "store embedded, epoch 1") {
		t.Fatalf("fence cluster: %d %q", code, out.String())
	}
}

func TestLsCmd(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"jobs/b", "jobs/a", "other"} {
		if _, err := c.Acquire(t.Context(), res, "h", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if code := run(t.Context(), []string{"ls", "--addr", url, "jobs/", "-o", "json"}, stdio{nil, &out, io.Discard}); code != 0 {
		t.Fatalf("fence ls exited %d", code)
	}
	var got struct {
		Locks []struct {
			Resource string `json:"resource"`
			Holder   string `json:"holder"`
		} `json:"locks"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Locks) != 2 || got.Locks[0].Resource != "jobs/a" || got.Locks[1].Resource != "jobs/b" {
		t.Fatalf("fence ls jobs/ -o json: %s (%v)", out.Bytes(), err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"ls", "--addr", url, "--limit", "1"}, stdio{nil, &out, io.Discard}); code != 0 || strings.Count(out.String(), "held by") != 1 {
		t.Fatalf("fence ls --limit 1: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"ls", "--addr", url, "nothing-here"}, stdio{nil, &out, io.Discard}); code != 0 || !strings.Contains(out.String(), "no lock held") {
		t.Fatalf("fence ls nothing-here: %d %q", code, out.String())
	}
	// A lease in a session says so, in ls and in status.
	sess, err := c.Acquire(t.Context(), fence.SessionResource("s"), "h", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(fence.WithSession(t.Context(), fence.SessionRef{Resource: sess.Resource, Token: sess.Token}), "in/x", "h", 0, 0); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"ls", "--addr", url, "in/"}, stdio{nil, &out, io.Discard}); code != 0 || !strings.Contains(out.String(), "in/x\theld by h") || !strings.HasSuffix(out.String(), "\tin session .session/s\n") {
		t.Fatalf("fence ls in/: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"status", "--addr", url, "in/x"}, stdio{nil, &out, io.Discard}); code != 0 || !strings.Contains(out.String(), fmt.Sprintf(", in session .session/s (token %d)", sess.Token)) {
		t.Fatalf("fence status in/x: %d %q", code, out.String())
	}
	// A shared group says who shares it.
	for _, h := range []string{"r2", "r1"} {
		if _, err := c.AcquireShared(t.Context(), "doc", h, time.Minute, 0); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if code := run(t.Context(), []string{"ls", "--addr", url, "doc"}, stdio{nil, &out, io.Discard}); code != 0 || !strings.HasPrefix(out.String(), "doc\theld shared by r1, r2\t") {
		t.Fatalf("fence ls doc: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"status", "--addr", url, "doc", "-o", "json"}, stdio{nil, &out, io.Discard}); code != 0 ||
		!strings.Contains(out.String(), `"holders":["r1","r2"]`) || !strings.Contains(out.String(), `"mode":"shared"`) || strings.Contains(out.String(), `"holder"`) {
		t.Fatalf("fence status doc -o json: %d %q", code, out.String())
	}
}

// TestFencesCmd checks fence fences: every resource's last token and last
// fence, held or not, through the client's Fences (GET /v1/fences) a page
// at a time.
func TestFencesCmd(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"jobs/b", "jobs/a", "jobs/a", "other"} {
		l, err := c.Acquire(t.Context(), res, "h", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(t.Context(), res, l.Token); err != nil {
			t.Fatal(err)
		}
	}
	fences, next, err := c.Fences(t.Context(), "jobs/", "", 1)
	if err != nil || len(fences) != 1 || fences[0] != (fence.FenceStatus{Resource: "jobs/a", LastToken: 2, LastFence: 2}) || next != "jobs/a" {
		t.Fatalf("Fences(jobs/, limit 1) = %v, %q, %v; want jobs/a with token 2, next jobs/a", fences, next, err)
	}
	var out bytes.Buffer
	if code := run(t.Context(), []string{"fences", "--addr", url, "jobs/", "-o", "json"}, stdio{nil, &out, io.Discard}); code != 0 {
		t.Fatalf("fence fences exited %d", code)
	}
	if want := `{"fences":[{"last_fence":2,"last_token":2,"resource":"jobs/a"},{"last_fence":1,"last_token":1,"resource":"jobs/b"}]}`; strings.TrimSpace(out.String()) != want {
		t.Fatalf("fence fences jobs/ -o json = %s, want %s", out.Bytes(), want)
	}
	out.Reset()
	if code := run(t.Context(), []string{"fences", "--addr", url}, stdio{nil, &out, io.Discard}); code != 0 ||
		out.String() != "jobs/a\tlast token 2\tlast fence 2\njobs/b\tlast token 1\tlast fence 1\nother\tlast token 1\tlast fence 1\n" {
		t.Fatalf("fence fences: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"fences", "--addr", url, "--limit", "1"}, stdio{nil, &out, io.Discard}); code != 0 || strings.Count(out.String(), "last token") != 1 {
		t.Fatalf("fence fences --limit 1: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"fences", "--addr", url, "nothing-here"}, stdio{nil, &out, io.Discard}); code != 0 || !strings.Contains(out.String(), "no resource fenced") {
		t.Fatalf("fence fences nothing-here: %d %q", code, out.String())
	}
}

func TestWatchCmd(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		c.Acquire(t.Context(), "other", "h", time.Minute, 0)
		c.Acquire(t.Context(), "jobs/a", "worker", time.Minute, 0)
	}()
	var out bytes.Buffer
	if code := run(t.Context(), []string{"watch", "--addr", url, "jobs/", "--count", "2", "-o", "json"}, stdio{nil, &out, io.Discard}); code != 0 {
		t.Fatalf("fence watch exited %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("fence watch --count 2 printed %q", out.String())
	}
	var e struct {
		ID, Type, Resource, Holder string
		Token                      uint64
	}
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil || e.Type != "granted" || e.Resource != "jobs/a" || e.Holder != "worker" || e.Token != 1 || e.ID == "" {
		t.Fatalf("first event %s (%v)", lines[0], err)
	}
	// A shared hold's events say so, and a request to let go says when.
	go func() {
		time.Sleep(300 * time.Millisecond)
		c.AcquireShared(t.Context(), "docs/a", "reader", time.Minute, 0)
		c.RequestRevoke(t.Context(), "docs/a", time.Minute)
	}()
	out.Reset()
	if code := run(t.Context(), []string{"watch", "--addr", url, "docs/", "--count", "3"}, stdio{nil, &out, io.Discard}); code != 0 {
		t.Fatalf("fence watch exited %d", code)
	}
	if text := out.String(); !strings.Contains(text, "granted\tdocs/a\tholder reader (shared)") || !strings.Contains(text, "revoke_requested") || !strings.Contains(text, "unless released") {
		t.Fatalf("fence watch docs/ printed %q", text)
	}
	if code := run(t.Context(), []string{"watch", "--addr", url, "--count", "-1"}, stdio{nil, io.Discard, io.Discard}); code != exitUsage {
		t.Fatalf("fence watch --count -1 exited %d, want %d", code, exitUsage)
	}
}
