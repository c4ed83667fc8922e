package main

import (
	"context"
	"fmt"

	"github.com/fence-lock/fence/internal/support/buildinfo"
)

const versionExamples = `  fence version
  fence --version
  fence version -o json | jq -r .commit
`

// versionCmd prints what the binary knows of its build: version, commit,
// build date and Go version.
func versionCmd(ctx context.Context, args []string, std stdio) error {
	var output string
	fs := newFlagSet("version", "fence version [-o json]\n\n"+
		"Prints the version, the commit the binary was built from (\"+modified\" if the\n"+
		"work tree had uncommitted changes), its date and the Go release that built it.\n"+
		"With -o json: one object with version, commit, date, go_version and modified.", versionExamples, std.out)
	addOutputFlag(fs, &output)
	positional, _, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if dashdash {
		positional = append(positional, "--")
	}
	if len(positional) > 0 {
		return &usageError{fmt.Errorf("version: unexpected argument %q", positional[0])}
	}
	if output != "text" && output != "json" {
		return &usageError{fmt.Errorf("--output %q: want text or json", output)}
	}
	info := buildinfo.Get()
	if output == "json" {
		return printJSON(std.out, info)
	}
	commit, date := info.Commit, info.Date
	if commit == "" {
		commit = "unknown"
	} else if info.Modified {
		commit += "+modified"
	}
	if date == "" {
		date = "unknown"
	}
	_, err = fmt.Fprintf(std.out, "fence %s\ncommit  %s\ndate    %s\ngo      %s\n", info.Version, commit, date, info.GoVersion)
	return err
}

// version returns the binary's version, such as v1.2.3 or devel.
func version() string { return buildinfo.Get().Version }
