package main

import (
	"errors"
	"io"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"listen":              "FENCE_LISTEN",
		"read-header-timeout": "FENCE_READ_HEADER_TIMEOUT",
	} {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q)=%q, want %q", flag, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), nil); err != nil {
			t.Fatal(err)
		}
		if cfg.Listen != "127.0.0.1:7700" || cfg.Data != "./fence-data" || cfg.WriteTimeout != 30*time.Second {
			t.Fatalf("cfg=%+v, want the documented defaults", cfg)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("EnvTwin", func(t *testing.T) {
		t.Setenv("FENCE_DATA", "/srv/fence")
		t.Setenv("FENCE_READ_TIMEOUT", "7s")
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), nil); err != nil {
			t.Fatal(err)
		}
		if cfg.Data != "/srv/fence" || cfg.ReadTimeout != 7*time.Second {
			t.Fatalf("cfg=%+v, want data and read timeout from the environment", cfg)
		}
	})

	t.Run("FlagWinsOverEnv", func(t *testing.T) {
		t.Setenv("FENCE_LISTEN", "127.0.0.1:1")
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), []string{"--listen", "127.0.0.1:2"}); err != nil {
			t.Fatal(err)
		}
		if cfg.Listen != "127.0.0.1:2" {
			t.Fatalf("Listen=%q, want the flag's", cfg.Listen)
		}
	})

	t.Run("BadEnv", func(t *testing.T) {
		t.Setenv("FENCE_IDLE_TIMEOUT", "forever")
		var cfg serveConfig
		err := parseFlags(serveFlags(&cfg, io.Discard), nil)
		var usage *usageError
		if !errors.As(err, &usage) {
			t.Fatalf("err=%v, want a usage error naming FENCE_IDLE_TIMEOUT", err)
		}
	})

	t.Run("LockDelay", func(t *testing.T) {
		t.Setenv("FENCE_LOCK_DELAY", "5s")
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), nil); err != nil {
			t.Fatal(err)
		}
		if cfg.LockDelay != 5*time.Second {
			t.Fatalf("LockDelay=%s, want 5s from FENCE_LOCK_DELAY", cfg.LockDelay)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("Validate", func(t *testing.T) {
		for _, args := range [][]string{
			{"--listen", ""}, {"--listen", "no-port"}, {"--data", ""},
			{"--write-timeout", "0s"}, {"--shutdown-grace", "-1s"},
			{"--lock-delay", "-1s"}, {"--lock-delay", "61s"},
		} {
			var cfg serveConfig
			if err := parseFlags(serveFlags(&cfg, io.Discard), args); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err == nil {
				t.Errorf("%v: Validate passed, want an error", args)
			}
		}
	})
}
