package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// envPrefix starts the environment twin of every flag.
const envPrefix = "FENCE_"

// envName returns the environment twin of a flag: --read-timeout is FENCE_READ_TIMEOUT.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flagAliases maps a short flag to the long flag it is another name of: -o
// is --output. Both set the same value; the long flag's environment twin
// (FENCE_OUTPUT) fills it only when neither was given.
var flagAliases = map[string]string{"o": "output"}

// noEnvTwin is implemented by the values of flags that have no environment
// twin: only the command line sets them.
type noEnvTwin interface{ noEnvTwin() }

// cmdLineOnly is a string flag without an environment twin.
type cmdLineOnly struct{ p *string }

// String returns the flag's value.
func (v cmdLineOnly) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

// Set sets the flag's value.
func (v cmdLineOnly) Set(s string) error { *v.p = s; return nil }

func (cmdLineOnly) noEnvTwin() {}

// flagCapture stands for a command's stdout when fence asks a command for
// its flags (for completion scripts): given --help, the command's flag set
// is recorded in it instead of its help being printed.
type flagCapture struct{ fs *flag.FlagSet }

// Write discards p: a command asked for its flags prints nothing.
func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// parseFlags parses args, which must be flags only, then applies the
// environment twins.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseOnce(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return applyEnv(fs)
}

// parseOnce runs fs.Parse(args) without letting the flag package print
// anything: --help prints the command's help on fs's output (its stdout)
// and returns flag.ErrHelp; a bad flag returns one usage error, in the
// user's terms, for the caller to print once.
func parseOnce(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	var failed setFailure
	restore := recordSets(fs, &failed)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	restore()
	switch {
	case err == nil:
		return nil
	case err == flag.ErrHelp:
		if c, ok := out.(*flagCapture); ok {
			c.fs = fs
			return flag.ErrHelp
		}
		var help strings.Builder
		fs.SetOutput(&help)
		if usage != nil {
			usage()
		} else {
			fs.PrintDefaults()
		}
		fs.SetOutput(out)
		io.WriteString(out, longFlags(help.String()))
		return flag.ErrHelp
	}
	return &usageError{fmt.Errorf("%s: %s", fs.Name(), flagProblem(fs, err, &failed))}
}

// flagLine is the start of a flag's entry in the flag package's
// PrintDefaults: "  -addr URL".
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]+)\b`)

// longFlags returns help, a command's help with its flags as the flag
// package's PrintDefaults prints them (-addr), with every long flag
// written as it is typed and documented: --addr; a one-letter flag keeps
// its one dash (-o).
func longFlags(help string) string {
	return flagLine.ReplaceAllString(help, "  --$1")
}

// setFailure is the first flag value that failed to parse during a Parse.
type setFailure struct {
	name, value string
	v           flag.Value
	err         error
}

// recordingValue is a flag's value during Parse: it records a failed Set, so
// that the error can name the flag and the value's kind.
type recordingValue struct {
	flag.Value
	name   string
	failed *setFailure
}

// Set sets the value, and records the first failure.
func (r *recordingValue) Set(s string) error {
	err := r.Value.Set(s)
	if err != nil && r.failed.err == nil {
		*r.failed = setFailure{name: r.name, value: s, v: r.Value, err: err}
	}
	return err
}

// IsBoolFlag keeps boolean flags boolean (no value needed) while wrapped.
func (r *recordingValue) IsBoolFlag() bool {
	b, ok := r.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// recordSets wraps every flag value of fs in a recordingValue, and returns
// the function that unwraps them.
func recordSets(fs *flag.FlagSet, failed *setFailure) (restore func()) {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		flags = append(flags, f)
		f.Value = &recordingValue{Value: f.Value, name: f.Name, failed: failed}
	})
	return func() {
		for _, f := range flags {
			f.Value = f.Value.(*recordingValue).Value
		}
	}
}

// dashed returns a flag's name as it is written: -o, --ttl.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagProblem says what is wrong with a command line that fs.Parse refused
// with err.
func flagProblem(fs *flag.FlagSet, err error, failed *setFailure) string {
	if failed.err != nil {
		return fmt.Sprintf("%s %q: %s", dashed(failed.name), failed.value, valueProblem(failed.v, failed.value, failed.err))
	}
	msg := err.Error()
	help := fmt.Sprintf("; see 'fence %s --help'", fs.Name())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if f.Usage != "" {
				names = append(names, f.Name)
			}
		})
		if s := suggest(name, names); s != "" {
			return fmt.Sprintf("unknown flag %s; did you mean %s?", dashed(name), dashed(s))
		}
		return fmt.Sprintf("unknown flag %s%s", dashed(name), help)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("%s needs a value", dashed(name))
	}
	return msg + help
}

// valueProblem says what is wrong with s, which v refused with err, in the
// terms of v's kind: a duration, a number, a boolean; for the other values,
// their own error.
func valueProblem(v flag.Value, s string, err error) string {
	var kind any
	if g, ok := v.(flag.Getter); ok {
		kind = g.Get()
	}
	switch kind.(type) {
	case time.Duration:
		return durationProblem(s)
	case bool:
		return "want true or false"
	case int, int64:
		if err.Error() == "value out of range" {
			return "out of range"
		}
		return "want a whole number"
	case uint, uint64:
		if err.Error() == "value out of range" {
			return "out of range"
		}
		return "want a whole number, 0 or more"
	case float64:
		return "want a number"
	case *slog.Level:
		return "want debug, info, warn or error"
	}
	return tidy(err.Error())
}

// durationProblem says what is wrong with s, which is not a duration.
func durationProblem(s string) string {
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Sprintf("a duration needs a unit, e.g. %ss", s)
	}
	return "want a duration such as 500ms, 10s or 1m30s"
}

// parseDuration is time.ParseDuration with durationProblem's error.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s", durationProblem(s))
	}
	return d, nil
}

// applyEnv sets every flag that the command line left alone from its
// environment twin, if that is set. A flag given on the command line, under
// any of its names (-o or --output), is never overridden.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if long, ok := flagAliases[f.Name]; ok {
			set[long] = true
		}
	})
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if long, ok := flagAliases[f.Name]; ok && fs.Lookup(long) != nil {
			return // the long flag's twin is its twin
		}
		if _, ok := f.Value.(noEnvTwin); ok {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := f.Value.Set(v); e != nil {
				err = &usageError{fmt.Errorf("%s=%q: %s", envName(f.Name), v, valueProblem(f.Value, v, e))}
			}
		}
	})
	return err
}

// setOnCommandLine reports whether the flag name (or another name of it)
// was given on the command line, not by its environment twin.
func setOnCommandLine(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name || flagAliases[f.Name] == name {
			found = true
		}
	})
	return found
}

// setDuration is a duration flag that records whether it was set, for a
// default that depends on other flags.
type setDuration struct {
	d   *time.Duration
	set *bool
}

// String returns the duration, "" if the flag was not set.
func (v *setDuration) String() string {
	if v.d == nil || !*v.set {
		return ""
	}
	return v.d.String()
}

// Set parses the duration and records that the flag was set.
func (v *setDuration) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d, *v.set = d, true
	return nil
}

// Get makes the flag a duration for valueProblem.
func (v *setDuration) Get() any { return *v.d }
