package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/chaos/proxy"
)

// TestRestore_BumpFencesResourcesUnknownToTheBackup restores an embedded
// store from a backup taken before a resource was created, bumps it, and
// checks that the resource's holder from before the restore is fenced: the
// next grant's token is above its token, its write is refused as fenced and
// its renewal as lease_lost. A bump that raised only the resources the
// backup holds gave the resource token 1 again, and let both through.
func TestRestore_BumpFencesResourcesUnknownToTheBackup(t *testing.T) {
	data := t.TempDir()
	srv := start(t, data)
	var l lease
	if code := call(t, "POST", srv.URL+"/v1/locks/old/acquire", `{"holder":"A","ttl_ms":60000}`, nil, &l); code != 200 {
		t.Fatalf("acquire old: %d", code)
	}
	srv.kill()

	backup := filepath.Join(t.TempDir(), "journal")
	if out, err := exec.Command("cp", "-a", "--sparse=always", filepath.Join(data, "journal"), backup).CombinedOutput(); err != nil {
		t.Fatalf("back up: %v %s", err, out)
	}

	srv = start(t, data)
	var stale lease
	if code := call(t, "POST", srv.URL+"/v1/locks/newres/acquire", `{"holder":"B","ttl_ms":60000}`, nil, &stale); code != 200 || stale.Token != 1 {
		t.Fatalf("acquire newres: %d %+v, want token 1", code, stale)
	}
	if code := call(t, "PUT", srv.URL+"/v1/kv/newres/k", "before the restore", map[string]string{"Fencing-Token": "1"}, nil); code != 200 {
		t.Fatalf("PUT with token 1 before the restore: %d", code)
	}
	srv.kill()

	if err := os.RemoveAll(filepath.Join(data, "journal")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", "--sparse=always", backup, filepath.Join(data, "journal")).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v %s", err, out)
	}
	out, err := exec.Command(binary, "bump", "--data", data, "--by", "1000").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "raised the token floor to 1001") {
		t.Fatalf("fence bump: %v\n%s", err, out)
	}

	srv = start(t, data)
	var fresh lease
	if code := call(t, "POST", srv.URL+"/v1/locks/newres/acquire", `{"holder":"C","ttl_ms":60000}`, nil, &fresh); code != 200 || fresh.Token <= stale.Token {
		t.Fatalf("acquire newres after the restore: %d %+v, want a token above %d", code, fresh, stale.Token)
	}
	if fresh.Token != 1002 {
		t.Fatalf("acquire newres after the restore: token %d, want 1002 (the floor, 1001, plus one)", fresh.Token)
	}
	var p problem
	if code := call(t, "PUT", srv.URL+"/v1/kv/newres/k", "stale", map[string]string{"Fencing-Token": "1"}, &p); code != 409 || p.Code != "fenced" {
		t.Fatalf("the stale holder's PUT after the restore: %d %+v, want 409 fenced", code, p)
	}
	p = problem{}
	if code := call(t, "POST", srv.URL+"/v1/locks/newres/renew", `{"token":1}`, nil, &p); code != 409 || p.Code != "lease_lost" {
		t.Fatalf("the stale holder's renew after the restore: %d %+v, want 409 lease_lost", code, p)
	}
	// The holder from before the backup is fenced too, and its resource
	// granted above the floor.
	p = problem{}
	if code := call(t, "PUT", srv.URL+"/v1/kv/old/k", "stale", map[string]string{"Fencing-Token": "1"}, &p); code != 409 || p.Code != "fenced" {
		t.Fatalf("the holder of old from before the backup: PUT %d %+v, want 409 fenced", code, p)
	}
	var o lease
	if code := call(t, "POST", srv.URL+"/v1/locks/old/acquire", `{"holder":"D","ttl_ms":60000}`, nil, &o); code != 200 || o.Token != 1002 {
		t.Fatalf("acquire old after the restore: %d %+v, want token 1002 (its lease from before ended)", code, o)
	}
	// A restart keeps the floor.
	srv.kill()
	srv = start(t, data)
	var again lease
	if code := call(t, "POST", srv.URL+"/v1/locks/third/acquire", `{"holder":"E","ttl_ms":1000}`, nil, &again); code != 200 || again.Token != 1002 {
		t.Fatalf("a new resource after a restart: %d %+v, want token 1002", code, again)
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
	if !strings.Contains(logs.String(), `"fence starting"`) || !strings.Contains(logs.String(), "waiting_for") {
		t.Fatalf("the log does not say what the server waits for:\n%s", logs)
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

// TestCluster_OneEtcdMemberCutOff cuts the path from the fence servers to one
// etcd member of three for longer than the election TTL, under load, with
// the other two reachable: that used to depose the leader and hang
// requests for the whole cut. It must cost no leader change, and no
// request beyond those that retried.
func TestCluster_OneEtcdMemberCutOff(t *testing.T) {
	e, _ := etcdStore(t)
	var hosts []string
	var proxies []*proxy.Proxy
	for _, m := range e.Members {
		p, err := proxy.New("127.0.0.1:0", strings.TrimPrefix(m.ClientURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		hosts = append(hosts, p.Addr())
	}
	store := "etcd://" + strings.Join(hosts, ",") + "/fence-cut/"
	c := startCluster(t, store, 2)
	leader := c.waitLeader(30 * time.Second)
	before, err := c.status(leader)
	if err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c.addrs(), 4)
	time.Sleep(time.Second)
	// Cut the member the leader's lease keepalives go to, whichever it is:
	// each in turn, past the election TTL (2 s).
	for _, p := range proxies {
		p.Blackhole(true)
		time.Sleep(3 * time.Second)
		p.Heal()
		time.Sleep(500 * time.Millisecond)
	}
	l.finish()
	after, err := c.status(leader)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch {
		t.Errorf("the writer epoch went from %d to %d: cutting one etcd member of three off cost a leader change", before.Epoch, after.Epoch)
	}
	l.check(t, newAPI(t, c.addrs(), 10*time.Second))
	failed := 0
	for _, w := range l.workers {
		failed += w.errors
	}
	if failed > 0 {
		t.Errorf("%d calls failed (after the client's retries) while one etcd member was cut off", failed)
	}
	t.Logf("%d cycles, %d failed calls, epoch %d before and after", l.ops.Load(), failed, after.Epoch)
}
