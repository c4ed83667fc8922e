package testserver

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runAs returns the user to run a server as: nil (this process's) unless
// this process is root, which server refuses; then username, which
// Debian's package pkg creates.
func runAs(server, username, pkg string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(username)
	if err != nil {
		return nil, fmt.Errorf("testserver: %s refuses to run as root, and there is no %q user to run it as (apt-get install %s): %v: %w", server, username, pkg, err, ErrNotInstalled)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("testserver: user %s: uid %q: %w", username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("testserver: user %s: gid %q: %w", username, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// reachable checks that the user of cred, username (with no supplementary
// groups, as it runs), can search every directory from / down to dir.
func reachable(dir string, cred *syscall.Credential, username string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
		perm := fi.Mode().Perm()
		var search bool
		switch st, _ := fi.Sys().(*syscall.Stat_t); {
		case st == nil:
			search = true // cannot tell: let the server say
		case st.Uid == cred.Uid:
			search = perm&0o100 != 0
		case st.Gid == cred.Gid:
			search = perm&0o010 != 0
		default:
			search = perm&0o001 != 0
		}
		if !search {
			return fmt.Errorf("testserver: running as root, the server runs as user %s (uid %d), who cannot reach %s: %s has mode %v; use a directory made by testserver.MkdirTemp (testserver.TempDir in tests)", username, cred.Uid, abs, d, perm)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
