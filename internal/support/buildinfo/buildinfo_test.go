package buildinfo

import (
	"runtime"
	"testing"
)

func TestGet(t *testing.T) {
	i := Get()
	if i.Version == "" || i.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v: want a version (devel at least) and %s", i, runtime.Version())
	}
}
