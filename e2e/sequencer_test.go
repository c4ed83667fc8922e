package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
)

// TestLock_Sequencer runs fence serve with a key from fence keygen and checks
// that fence lock gives the command a FENCE_SEQUENCER that the keys served at
// GET /v1/keys verify for its resource and token.
func TestLock_Sequencer(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	if out, err := exec.Command(binary, "keygen", "--out", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v: %s", err, out)
	}
	srv := start(t, t.TempDir(), "--signing-key", keyFile)
	var body struct {
		Keys []fence.PublicKey `json:"keys"`
	}
	call(t, "GET", srv.URL+"/v1/keys", "", nil, &body)
	if len(body.Keys) != 1 {
		t.Fatalf("GET /v1/keys: %+v, want one key", body)
	}
	ks := fence.KeySet{body.Keys[0].ID: body.Keys[0].Key}

	out, err := fenceCmd(srv, "lock", "orders", "--", "sh", "-c", `echo "$FENCE_TOKEN $FENCE_SEQUENCER"`).Output()
	if err != nil {
		t.Fatalf("fence lock: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		t.Fatalf("output %q, want the token and a sequencer", out)
	}
	token, err := fence.ParseToken(fields[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Verify(fields[1], "orders", token); err != nil {
		t.Fatalf("FENCE_SEQUENCER %q: %v", fields[1], err)
	}

	// fence acquire prints it too.
	out, err = fenceCmd(srv, "acquire", "stock", "-o", "json").Output()
	if err != nil {
		t.Fatalf("fence acquire: %v", err)
	}
	var l struct {
		Token     fence.Token `json:"token"`
		Sequencer string      `json:"sequencer"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("fence acquire -o json: %q: %v", out, err)
	}
	if _, err := ks.Verify(l.Sequencer, "stock", l.Token); err != nil {
		t.Fatalf("fence acquire: sequencer %q: %v", l.Sequencer, err)
	}
	out, err = fenceCmd(srv, "acquire", "other").Output()
	if err != nil || !strings.Contains(string(out), ", sequencer ") {
		t.Fatalf("fence acquire (text): %q, %v; want the sequencer", out, err)
	}
}
