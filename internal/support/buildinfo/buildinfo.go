// Package buildinfo says which fence this is: its version, the commit it was
// built from, when, and with which Go. Release builds set Version, Commit
// and Date with -ldflags "-X"; otherwise they come from the module and VCS
// information that go build records.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Set at link time by release builds, e.g.
// -ldflags "-X github.com/fence-lock/fence/internal/support/buildinfo.Version=v1.2.3".
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

// Info is what a binary knows of its build.
type Info struct {
	Version   string `json:"version"`    // a module version such as v1.2.3, or "devel"
	Commit    string `json:"commit"`     // the VCS revision, "" if unknown
	Date      string `json:"date"`       // the commit's time (or the release build's), RFC 3339; "" if unknown
	GoVersion string `json:"go_version"` // the Go release that built it
	Modified  bool   `json:"modified"`   // built from a work tree with uncommitted changes
}

var (
	once sync.Once
	info Info
)

// Get returns the build's information.
func Get() Info {
	once.Do(func() {
		info = Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version()}
		if bi, ok := debug.ReadBuildInfo(); ok {
			if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					if info.Commit == "" {
						info.Commit = s.Value
					}
				case "vcs.time":
					if info.Date == "" {
						info.Date = s.Value
					}
				case "vcs.modified":
					info.Modified = s.Value == "true"
				}
			}
		}
		if info.Version == "" {
			info.Version = "devel"
		}
	})
	return info
}
