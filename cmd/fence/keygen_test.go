package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
)

func TestKeygen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "signing.key")
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"keygen", "--out", file}, stdio{nil, &out, &errOut}); code != exitOK {
		t.Fatalf("keygen: exit %d, stderr %s", code, errOut.String())
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	k, err := loadSigningKey(file)
	if err != nil {
		t.Fatalf("loadSigningKey: %v", err)
	}
	// The output names the key id and its public JWK.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != "key id: "+k.ID {
		t.Fatalf("output %q, want the key id %s and the public key", out.String(), k.ID)
	}
	var pub fence.PublicKey
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "public key: ")), &pub); err != nil || !pub.Key.Equal(k.Public().Key) || pub.ID != k.ID {
		t.Fatalf("public key line %q: %+v, %v", lines[1], pub, err)
	}

	before, _ := os.ReadFile(file)
	errOut.Reset()
	if code := run(t.Context(), []string{"keygen", "--out", file}, stdio{nil, io.Discard, &errOut}); code == exitOK || !strings.Contains(errOut.String(), "--force") {
		t.Fatalf("keygen over an existing file: exit %d, stderr %q; want a refusal", code, errOut.String())
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Fatal("the refused keygen changed the file")
	}
	os.Chmod(file, 0o644)
	if code := run(t.Context(), []string{"keygen", "--out", file, "--force"}, stdio{nil, io.Discard, io.Discard}); code != exitOK {
		t.Fatalf("keygen --force: exit %d", code)
	}
	if after, _ := os.ReadFile(file); bytes.Equal(before, after) {
		t.Fatal("keygen --force kept the old key")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after --force %v, want 0600", fi.Mode().Perm())
	}
	if code := run(t.Context(), []string{"keygen"}, stdio{nil, io.Discard, io.Discard}); code != exitUsage {
		t.Fatalf("keygen without --out: exit %d, want %d", code, exitUsage)
	}
}

func TestServe_SigningKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "signing.key")
	if code := run(t.Context(), []string{"keygen", "--out", keyFile}, stdio{nil, io.Discard, io.Discard}); code != exitOK {
		t.Fatalf("keygen: exit %d", code)
	}
	k, err := loadSigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	// A bad key file is a clear usage error.
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("not a key\n"), 0o600)
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "d0"), "--signing-key", bad}, stdio{nil, io.Discard, &errOut})
	if code != exitUsage || !strings.Contains(errOut.String(), "--signing-key") {
		t.Fatalf("serve with a bad key: exit %d, stderr %q", code, errOut.String())
	}

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "d1"), "--signing-key", keyFile}, stdio{nil, io.Discard, pw})
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("serve: exit %d", code)
		}
	}()
	sc := bufio.NewScanner(pr)
	var addr string
	for addr == "" && sc.Scan() {
		var line struct {
			Msg          string `json:"msg"`
			Addr         string `json:"addr"`
			SigningKeyID string `json:"signing_key_id"`
		}
		json.Unmarshal(sc.Bytes(), &line)
		if line.Msg == "fence serving" {
			if line.SigningKeyID != k.ID {
				t.Fatalf("startup line %s lacks signing_key_id %s", sc.Bytes(), k.ID)
			}
			addr = line.Addr
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		t.Fatal("serve logged no address")
	}
	c, err := client.NewAPI("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID {
		t.Fatalf("Keys=%v, %v; want %s", keys, err, k.ID)
	}
	l, err := c.Acquire(ctx, "orders", "a", 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (fence.KeySet{k.ID: keys[0].Key}).Verify(l.Sequencer, "orders", l.Token); err != nil {
		t.Fatalf("lease %+v: %v", l, err)
	}
}
