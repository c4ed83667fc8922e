package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
