package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fence-lock/fence"
)

const keygenExamples = `  fence keygen --out /etc/fence/signing.key
  fence serve --signing-key /etc/fence/signing.key
`

// keygenCmd writes a new Ed25519 signing key for serve --signing-key, mode
// 0600, and prints its key id and public key (the JWK that GET /v1/keys serves).
func keygenCmd(ctx context.Context, args []string, std stdio) error {
	var (
		out   string
		force bool
	)
	fs := newFlagSet("keygen", "fence keygen --out FILE [--force]", keygenExamples, std.out)
	fs.StringVar(&out, "out", "", "key `file` to write (mode 0600)")
	fs.BoolVar(&force, "force", false, "overwrite FILE if it exists")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if out == "" {
		return &usageError{errors.New("keygen: --out FILE is required")}
	}
	k, err := fence.GenerateSigningKey()
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	text, err := k.MarshalText()
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	pub, err := json.Marshal(k.Public())
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeKeyFile(out, append(text, '\n'), force); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(std.out, "key id: %s\npublic key: %s\n", k.ID, pub)
	return nil
}

// writeKeyFile writes data to a new file of mode 0600, or over an existing
// one if force is set, and syncs it.
func writeKeyFile(name string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(name, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to overwrite it", name)
	}
	if err != nil {
		return err
	}
	if force {
		// An existing file keeps its mode: make sure it is private.
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
