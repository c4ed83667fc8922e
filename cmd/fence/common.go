package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// DefaultAddr is the server the client commands talk to unless told otherwise.
const DefaultAddr = "http://127.0.0.1:7700"

// clientConfig holds the flags every client command shares.
type clientConfig struct {
	Addr   string // the server's base URL, or a cluster's, separated by commas
	Output string // "text" or "json"
	// AuthToken is the bearer token sent with every request; "" none.
	AuthToken string
	// CACert is a PEM file of the CAs that verify an https server; "" the system's.
	CACert string
	// ClientCert and ClientKey are a client certificate for a server with --client-ca.
	ClientCert, ClientKey string
}

// newFlagSet returns a flag set for command name whose --help prints synopsis,
// the flags and examples on out, the command's stdout.
func newFlagSet(name, synopsis, examples string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n", synopsis)
		if examples != "" {
			fmt.Fprintf(fs.Output(), "Examples:\n%s\n", examples)
		}
		fmt.Fprintf(fs.Output(), "Flags (each has an environment twin FENCE_<FLAG>%s):\n", envExceptions(fs))
		fs.PrintDefaults()
	}
	return fs
}

// envExceptions names the flags of fs without an environment twin, for the
// heading of the flags in --help.
func envExceptions(fs *flag.FlagSet) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(noEnvTwin); ok {
			names = append(names, dashed(f.Name))
		}
	})
	if len(names) == 0 {
		return ""
	}
	return ", except " + strings.Join(names, " and ")
}

// addClientFlags adds --addr, --auth-token, --cacert, --client-cert,
// --client-key and -o to fs.
func addClientFlags(fs *flag.FlagSet, cfg *clientConfig) {
	fs.StringVar(&cfg.Addr, "addr", DefaultAddr, "base `URL` of the fence server (host:port means http://host:port), or of a cluster's servers separated by commas (calls stay on one that answers and fail over to the next)")
	addAuthTokenFlag(fs, cfg)
	addTLSClientFlags(fs, cfg)
	addOutputFlag(fs, &cfg.Output)
}

// addOutputFlag adds --output and its short name -o to fs: one flag, whose
// environment twin is FENCE_OUTPUT.
func addOutputFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "output", "text", "output `format`: text or json (also -o)")
	fs.Var(fs.Lookup("output").Value, "o", "output `format`: text or json (same as --output)")
}

// validateOutput checks -o.
func (c *clientConfig) validateOutput() error {
	if c.Output != "text" && c.Output != "json" {
		return &usageError{fmt.Errorf("--output %q: want text or json", c.Output)}
	}
	return nil
}

// parseArgs parses flags given anywhere among the positional arguments (so
// that `fence lock orders --ttl 5s -- cmd` works), applies environment twins,
// and returns the positional arguments and, if "--" was given, the words after it.
func parseArgs(fs *flag.FlagSet, args []string) (positional, command []string, dashdash bool, err error) {
	rest := args
	for {
		if err := parseOnce(fs, rest); err != nil {
			return nil, nil, false, err
		}
		left := fs.Args()
		consumed := len(rest) - len(left)
		if consumed > 0 && rest[consumed-1] == "--" {
			command, dashdash = left, true
			break
		}
		if len(left) == 0 {
			break
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}
	if err := applyEnv(fs); err != nil {
		return nil, nil, false, err
	}
	return positional, command, dashdash, nil
}

// wantArgs checks the number of positional arguments.
func wantArgs(name string, positional []string, names ...string) error {
	if len(positional) != len(names) {
		return &usageError{fmt.Errorf("%s: want %d argument(s) (%s), got %d", name, len(names), strings.Join(names, " "), len(positional))}
	}
	return nil
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// addAuthTokenFlag adds --auth-token to fs. Prefer its environment twin
// FENCE_AUTH_TOKEN: a flag's value shows in the process list.
func addAuthTokenFlag(fs *flag.FlagSet, cfg *clientConfig) {
	fs.StringVar(&cfg.AuthToken, "auth-token", "", "bearer `token` sent to the server (prefer FENCE_AUTH_TOKEN: flags show in ps)")
}

// addTLSClientFlags adds --cacert, --client-cert and --client-key to fs.
func addTLSClientFlags(fs *flag.FlagSet, cfg *clientConfig) {
	fs.StringVar(&cfg.CACert, "cacert", "", "PEM `file` of the CA certificates that verify an https --addr (default: the system's)")
	fs.StringVar(&cfg.ClientCert, "client-cert", "", "PEM certificate `file` presented to a server with --client-ca (with --client-key)")
	fs.StringVar(&cfg.ClientKey, "client-key", "", "PEM private key `file` of --client-cert")
}

// cleanAddr returns addr, the --addr of a command (one server's base URL,
// or a cluster's separated by commas), with http:// in front of every entry
// that has no scheme: 127.0.0.1:7700 is http://127.0.0.1:7700. An entry with
// a scheme other than http and https is a usage error.
func cleanAddr(addr string) (string, error) {
	entries := strings.Split(addr, ",")
	for i, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue // the client says which entry is empty
		}
		scheme, _, ok := strings.Cut(e, "://")
		if !ok {
			e = "http://" + e
		} else if s := strings.ToLower(scheme); s != "http" && s != "https" {
			return "", &usageError{fmt.Errorf("--addr %q: want host:port, http://host:port or https://host:port", e)}
		}
		entries[i] = e
	}
	return strings.Join(entries, ","), nil
}

// addrError is a server address that the client refused, as a usage error
// in the terms of --addr.
func addrError(err error) error {
	msg := tidy(err.Error())
	if strings.HasPrefix(msg, "no server address") {
		return &usageError{errors.New("--addr is empty: want host:port, http://host:port or https://host:port")}
	}
	msg = strings.TrimPrefix(msg, "server addresses ")
	msg = strings.TrimPrefix(msg, "server address ")
	return &usageError{fmt.Errorf("--addr %s", msg)}
}
