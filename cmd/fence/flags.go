package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// envPrefix starts the environment twin of every flag.
const envPrefix = "FENCE_"

// envName returns the environment twin of a flag: --read-timeout is FENCE_READ_TIMEOUT.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, which must be flags only, then applies the
// environment twins.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return applyEnv(fs)
}

// applyEnv sets every flag that the command line left alone from its
// environment twin, if that is set.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := f.Value.Set(v); e != nil {
				err = &usageError{fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)}
			}
		}
	})
	return err
}
