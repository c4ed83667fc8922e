package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServe_GracefulShutdown checks that SIGTERM stops the server with exit
// code 0, answers a long-polling acquire instead of hanging, and keeps state.
func TestServe_GracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, dir)
	a := acquireLease(t, srv.URL, "r", "A", 60000)
	waitC := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/locks/r/acquire", "application/json", strings.NewReader(`{"holder":"B","wait_ms":60000}`))
		if err != nil {
			waitC <- 0
			return
		}
		resp.Body.Close()
		waitC <- resp.StatusCode
	}()
	time.Sleep(200 * time.Millisecond) // B is queued
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("fence serve did not stop on SIGTERM:\n%s", srv.logs)
	}
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, srv.logs)
	}
	if code := <-waitC; code != 503 && code != 0 {
		t.Fatalf("waiting acquire: status %d, want 503 (or a closed connection)", code)
	}
	if !strings.Contains(srv.logs.String(), `"msg":"fence stopped"`) {
		t.Fatalf("no shutdown line in logs:\n%s", srv.logs)
	}
	srv = start(t, dir)
	var st struct {
		Held  bool   `json:"held"`
		Token uint64 `json:"token"`
	}
	call(t, "GET", srv.URL+"/v1/locks/r", "", nil, &st)
	if !st.Held || st.Token != a.Token {
		t.Fatalf("after restart: %+v, want A's lease %d held", st, a.Token)
	}
}

// TestServe_Env checks the environment twins of the flags, and that the
// command line wins over them.
func TestServe_Env(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "FENCE_DATA="+dir, "FENCE_LISTEN=256.0.0.1:1", "FENCE_LOG_LEVEL=debug")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// fence starting, then fence serving.
	rd := bufio.NewReader(stderr)
	var line string
	for range 2 {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = l
	}
	if !strings.Contains(line, `"msg":"fence serving"`) || !strings.Contains(line, `"data":"`+dir+`"`) || !strings.Contains(line, `127.0.0.1:`) {
		t.Fatalf("second line %s, want serving on 127.0.0.1 with data %s", line, dir)
	}
	if _, err := os.Stat(dir + "/journal"); err != nil {
		t.Fatalf("state not under FENCE_DATA: %v", err)
	}
}

// TestServe_BadConfig checks that bad flags and env values fail clearly with exit code 2.
func TestServe_BadConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"serve", "--listen", "nonsense"}, "", "--listen"},
		{[]string{"serve", "--read-timeout", "0s"}, "", "--read-timeout"},
		{[]string{"serve", "--bogus"}, "", "bogus"},
		{[]string{"serve"}, "FENCE_WRITE_TIMEOUT=soon", "FENCE_WRITE_TIMEOUT"},
		{[]string{"serve", "extra"}, "", "extra"},
		{[]string{"frobnicate"}, "", "unknown command"},
	} {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = append(os.Environ(), "FENCE_DATA="+t.TempDir())
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v %s: exit %d, output %q; want exit 2 mentioning %q", tc.args, tc.env, code, out, tc.want)
		}
	}
}

// TestServe_DataDirInUse checks that a second server on the same data
// directory refuses to start instead of sharing the file.
func TestServe_DataDirInUse(t *testing.T) {
	dir := t.TempDir()
	start(t, dir)
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--data", dir)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "in use") {
		t.Fatalf("second server: exit %d, %q; want exit 1, data directory in use", cmd.ProcessState.ExitCode(), out)
	}
}

// TestServe_SlowClient checks that a client that stalls while sending its
// headers or body is disconnected by the server's timeouts.
func TestServe_SlowClient(t *testing.T) {
	srv := start(t, t.TempDir(), "--read-header-timeout", "300ms", "--read-timeout", "600ms")
	addr := strings.TrimPrefix(srv.URL, "http://")
	for name, send := range map[string]string{
		"Headers": "PUT /v1/kv/r/k HTTP/1.1\r\nHost: x\r\n",
		"Body":    "PUT /v1/kv/r/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nContent-Length: 100\r\n\r\npartial",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprint(conn, send)
			start := time.Now()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			io.Copy(io.Discard, conn) // returns when the server closes the connection
			if waited := time.Since(start); waited > 5*time.Second {
				t.Fatalf("connection held %v, want it closed by the server's timeout", waited)
			}
		})
	}
}

// TestServe_LongPollOutlivesWriteTimeout checks that an acquire waiting longer
// than --write-timeout still gets its answer.
func TestServe_LongPollOutlivesWriteTimeout(t *testing.T) {
	srv := start(t, t.TempDir(), "--write-timeout", "500ms")
	a := acquireLease(t, srv.URL, "r", "A", 60000)
	go func() {
		time.Sleep(1200 * time.Millisecond)
		http.Post(srv.URL+"/v1/locks/r/release", "application/json", strings.NewReader(fmt.Sprintf(`{"token":%d}`, a.Token)))
	}()
	var b lease
	if code := call(t, "POST", srv.URL+"/v1/locks/r/acquire", `{"holder":"B","wait_ms":5000}`, nil, &b); code != 200 || b.Token != a.Token+1 {
		t.Fatalf("B: status %d lease %+v, want 200 with token %d", code, b, a.Token+1)
	}
}

// TestServe_HealthzAndHUP checks fence healthz against a running server and
// a stopped one, and that SIGHUP without --auth-file leaves the server
// serving (it would stop it by default), as a service manager's reload
// sends it.
func TestServe_HealthzAndHUP(t *testing.T) {
	srv := startServer(t, t.TempDir(), true)
	healthz := func() error {
		return exec.Command(binary, "healthz", "--addr", srv.URL, "--timeout", "2s").Run()
	}
	if err := healthz(); err != nil {
		t.Fatalf("fence healthz against a ready server: %v", err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if isDone(srv.exited) {
		t.Fatal("SIGHUP without --auth-file stopped the server")
	}
	if err := healthz(); err != nil {
		t.Fatalf("fence healthz after SIGHUP: %v", err)
	}
	if !strings.Contains(srv.logs.String(), "nothing to reload") {
		t.Errorf("no log line for the SIGHUP: %s", srv.logs.String())
	}
	srv.kill()
	if err := healthz(); err == nil {
		t.Fatal("fence healthz against a stopped server exited 0")
	}
}

// TestServe_Unfenced checks fence serve --unfenced: a best-effort
// resource's write without a token is accepted and logged as unfenced,
// changes no fence, and one with a stale token is still rejected; other
// resources, and claims, still need a token.
func TestServe_Unfenced(t *testing.T) {
	srv := startServer(t, t.TempDir(), true, "--unfenced", "cache/")
	put := func(path, token string) int {
		t.Helper()
		h := http.Header{}
		if token != "" {
			h.Set("Fencing-Token", token)
		}
		return apiDo(t, "PUT", srv.URL+path, []byte("v"), h).status
	}
	tok := apiAcquire(t, srv.URL, "cache%2Fusers", "filler", 60000)
	apiRelease(t, srv.URL, "cache%2Fusers", tok)
	apiAcquire(t, srv.URL, "cache%2Fusers", "filler-2", 60000) // token 2: token 1 is stale
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/v1/kv/cache%2Fusers/u1", "", 200},
		{"/v1/kv/cache%2Fusers/u1", "1", 409},
		{"/v1/kv/cache%2Fusers/u1", "2", 200},
		{"/v1/kv/orders/o1", "", 428},
	} {
		if got := put(c.path, c.token); got != c.want {
			t.Errorf("PUT %s token %q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
	if r := apiDo(t, "DELETE", srv.URL+"/v1/kv/cache%2Fusers/u1", nil, nil); r.status != 200 {
		t.Errorf("unfenced DELETE: %d %s", r.status, r.body)
	}
	if r := apiDo(t, "POST", srv.URL+"/v1/fences/cache%2Fusers", nil, nil); r.status != 428 {
		t.Errorf("a claim without a token: %d, want 428", r.status)
	}
	if r := apiDo(t, "GET", srv.URL+"/v1/fences/cache%2Fusers", nil, nil); !strings.Contains(string(r.body), `"last_fence":2`) {
		t.Errorf("the fence moved: %s", r.body)
	}
	if !strings.Contains(srv.logs.String(), `"unfenced":true`) {
		t.Errorf("no unfenced write in the log:\n%s", srv.logs.String())
	}
}

// TestServe_StartsWithoutQuorum starts a server on an etcd that has lost
// its quorum: it used to open its port and then hang, answering nothing
// and logging nothing. It must answer /healthz 200 and /readyz 503
// not_ready at once, say in its log what it waits for, and serve once
// etcd has its quorum back.
func TestServe_StartsWithoutQuorum(t *testing.T) {
	e, store := etcdStore(t)
	for _, m := range e.Members[1:] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(binary, "serve", "--store", store, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	logs := &lockedBuffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteLine(sc.Text())
		}
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("/healthz without quorum: %d, want 200", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz does not answer without quorum: %v\n%s", err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var p struct{ Code, Detail string }
	resp, err := client.Get(url + "/readyz")
	if err != nil {
		t.Fatalf("/readyz without quorum: %v (it must answer at once)", err)
	}
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 503 || p.Code != "not_ready" || !strings.Contains(p.Detail, "etcd://") {
		t.Fatalf("/readyz without quorum: %d %+v, want 503 not_ready naming the store", resp.StatusCode, p)
	}
	// The line was written before the server answered, but the goroutine
	// that reads its stderr may not have copied it yet.
	for said := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"fence starting"`) || !strings.Contains(logs.String(), "waiting_for"); {
		if time.Now().After(said) {
			t.Fatalf("the log does not say what the server waits for:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range e.Members[1:] {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 60 s after etcd got its quorum back:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
