package testserver

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"time"
)

// npmInstalls makes one npm ci per package directory and process at most.
var npmInstalls sync.Map // directory -> *npmInstalled

type npmInstalled struct {
	once sync.Once
	err  error
}

// npmInstall runs npm ci (from the committed lockfile) in pkg, the
// directory of the server called name, once per process. Without npm, or
// when npm ci fails, the error wraps ErrNotInstalled.
func npmInstall(name, pkg string) error {
	v, _ := npmInstalls.LoadOrStore(pkg, &npmInstalled{})
	in := v.(*npmInstalled)
	in.once.Do(func() {
		npm, err := exec.LookPath("npm")
		if err != nil {
			in.err = fmt.Errorf("testserver: %s: npm not on PATH (apt-get install npm): %w", name, ErrNotInstalled)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = pkg
		cmd.SysProcAttr = sysProcAttr(nil)
		if _, err := run(ctx, cmd); err != nil {
			in.err = fmt.Errorf("testserver: %s: npm ci in %s: %w: %w", name, pkg, ErrNotInstalled, err)
		}
	})
	return in.err
}
