package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		for _, tt := range []struct {
			url, prefix string
			endpoints   []string
			tls         bool
			user, pass  string
			dial        time.Duration
		}{
			{"etcd://127.0.0.1:2379", DefaultStorePrefix, []string{"http://127.0.0.1:2379"}, false, "", "", 5 * time.Second},
			{"etcd://a:1,b:2,c:3/fence", "/fence", []string{"http://a:1", "http://b:2", "http://c:3"}, false, "", "", 5 * time.Second},
			{"etcds://u:p%40ss@a:1/x/y/?dial_timeout=2s", "/x/y/", []string{"https://a:1"}, true, "u", "p@ss", 2 * time.Second},
			{"etcd://[::1]:2379/", DefaultStorePrefix, []string{"http://[::1]:2379"}, false, "", "", 5 * time.Second},
		} {
			cfg, prefix, err := parseURL(tt.url)
			if err != nil {
				t.Fatalf("parseURL(%q): %v", tt.url, err)
			}
			if prefix != tt.prefix || strings.Join(cfg.Endpoints, ",") != strings.Join(tt.endpoints, ",") ||
				(cfg.TLS != nil) != tt.tls || cfg.Username != tt.user || cfg.Password != tt.pass || cfg.DialTimeout != tt.dial {
				t.Fatalf("parseURL(%q) = %v %q tls=%v %q %q %s", tt.url, cfg.Endpoints, prefix, cfg.TLS != nil, cfg.Username, cfg.Password, cfg.DialTimeout)
			}
		}
	})
	t.Run("Bad", func(t *testing.T) {
		for _, u := range []string{
			"http://a:1", "etcd://", "etcd://a", "etcd://a:1,,b:2", "etcd://a:1?cacert=x", "etcd://a:1?nope=1",
			"etcds://a:1?dial_timeout=-1s", "etcds://a:1?dial_timeout=soon", "etcds://a:1?cacert=/does/not/exist",
			"etcds://a:1?cert=/does/not/exist&key=/nor/this", "etcd://u:secret@a:1?nope=1", "%zz",
		} {
			_, _, err := parseURL(u)
			if err == nil {
				t.Fatalf("parseURL(%q): want an error", u)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("parseURL(%q): error %q shows the password", u, err)
			}
		}
	})
	t.Run("CACert", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "ca.pem")
		os.WriteFile(file, []byte("not a certificate"), 0o600)
		if _, _, err := parseURL("etcds://a:1?cacert=" + file); err == nil || !strings.Contains(err.Error(), "no PEM") {
			t.Fatalf("a cacert without certificates: err=%v", err)
		}
	})
}
