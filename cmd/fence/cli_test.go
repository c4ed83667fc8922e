package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/auth"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/internal/support/buildinfo"
)

// closedAddr returns a loopback host:port that refuses connections.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// oneLine checks that stderr is a single message: one line, "fence: "
// once, and none of the layers the error passed through.
func oneLine(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "fence: ") || strings.Count(stderr, "fence: ") != 1 {
		t.Errorf("%s: stderr %q, want one line starting with \"fence: \" once", what, stderr)
	}
	for _, layer := range []string{"client:", "/v1/", "journal:", "bolt:", "Usage:", "flag provided", "dial tcp"} {
		if strings.Contains(stderr, layer) {
			t.Errorf("%s: stderr %q mentions %q", what, stderr, layer)
		}
	}
}

// visibleCommands returns the names of the commands that the usage lists.
func visibleCommands() []string {
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return names
}

// TestHelp checks that help goes to stdout with exit 0, for every command,
// both as `fence CMD --help` and `fence help CMD`.
func TestHelp(t *testing.T) {
	ctx := t.Context()
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, stdout, stderr := runFence(ctx, "", args...)
		if code != 0 || stderr != "" {
			t.Errorf("fence %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, stderr)
		}
		for _, name := range visibleCommands() {
			if !strings.Contains(stdout, "\n  "+name+" ") {
				t.Errorf("fence %s does not list %s:\n%s", strings.Join(args, " "), name, stdout)
			}
		}
	}
	for _, c := range commands {
		code, stdout, stderr := runFence(ctx, "", c.name, "--help")
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: fence "+c.name) {
			t.Errorf("fence %s --help: exit %d, stderr %q, stdout %.60q...; want 0, the help on stdout", c.name, code, stderr, stdout)
		}
		code, helpOut, stderr := runFence(ctx, "", "help", c.name)
		if code != 0 || stderr != "" || helpOut != stdout {
			t.Errorf("fence help %s: exit %d, stderr %q; want 0 and the same help as --help", c.name, code, stderr)
		}
	}
	code, stdout, stderr := runFence(ctx, "", "help", "pt")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "did you mean put?") {
		t.Errorf("fence help pt: exit %d, stdout %q, stderr %q; want %d and a suggestion", code, stdout, stderr, exitUsage)
	}
}

// singleDashLong is a long flag written with one dash, as Go's flag
// package prints it (-addr): fence's help and docs write --addr. Flags
// are in lower case; a signal (kill -HUP) is not one.
var singleDashLong = regexp.MustCompile(`(?:^|[\s\[(|,"'=])(-[a-z][a-z0-9-]+)`)

// TestHelp_LongFlags: every command's help, the hidden ones' too, writes
// its long flags with two dashes (--addr), as the docs do, and its short
// ones with one (-o).
func TestHelp_LongFlags(t *testing.T) {
	top, _, _ := strings.Cut(usage(), "Exit codes:")
	helps := map[string]string{"fence help": top}
	for _, c := range commands {
		code, stdout, stderr := runFence(t.Context(), "", c.name, "--help")
		if code != 0 {
			t.Fatalf("fence %s --help: exit %d\n%s", c.name, code, stderr)
		}
		helps["fence "+c.name+" --help"] = stdout
	}
	for how, help := range helps {
		for i, line := range strings.Split(help, "\n") {
			for _, m := range singleDashLong.FindAllStringSubmatch(line, -1) {
				t.Errorf("%s, line %d: %s, want -%s:\n%s", how, i+1, m[1], m[1], line)
			}
		}
	}
	// Each flag is listed under its own name: --ttl, and -o beside --output.
	for cmd, wants := range map[string][]string{
		"lock":   {"\n  --ttl duration\n", "\n  --quiet\n"},
		"status": {"\n  -o format\n", "\n  --output format\n", "\n  --addr URL\n"},
		"serve":  {"\n  --listen address\n"},
	} {
		_, stdout, _ := runFence(t.Context(), "", cmd, "--help")
		for _, want := range wants {
			if !strings.Contains(stdout, want) {
				t.Errorf("fence %s --help lacks %q:\n%s", cmd, want, stdout)
			}
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	for word, want := range map[string]string{
		"pt":     `unknown command "pt"; did you mean put?`,
		"stauts": `unknown command "stauts"; did you mean status?`,
		"lcok":   `unknown command "lcok"; did you mean lock?`,
		"Relase": `unknown command "Relase"; did you mean release?`,
		"xyzzy":  `unknown command "xyzzy"; run 'fence help' for the commands`,
		"--addr": `the command comes first`,
	} {
		code, stdout, stderr := runFence(t.Context(), "", word, "x")
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, want) {
			t.Errorf("fence %s: exit %d, stdout %q, stderr %q; want %d and %q", word, code, stdout, stderr, exitUsage, want)
		}
		oneLine(t, "fence "+word, stderr)
	}
}

// TestFlagError checks that a bad flag is reported once, in one line,
// without the flag package's own message and usage dump.
func TestFlagError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"put", "orders", "k", "--bogus"}, "put: unknown flag --bogus; see 'fence put --help'"},
		{[]string{"put", "orders", "k", "--tokn", "3"}, "put: unknown flag --tokn; did you mean --token?"},
		{[]string{"lock", "orders", "--ttl"}, "lock: --ttl needs a value"},
		{[]string{"ls", "--limit", "many"}, `ls: --limit "many": want a whole number`},
		{[]string{"put", "orders", "k", "v", "--token", "abc"}, `put: --token "abc": invalid fencing token`},
		{[]string{"serve", "--insecure-listen=maybe"}, `serve: --insecure-listen "maybe": want true or false`},
		{[]string{"status", "orders", "-o", "yaml"}, `--output "yaml": want text or json`},
	} {
		code, stdout, stderr := runFence(t.Context(), "", tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("fence %s: exit %d, stdout %q, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, stdout, stderr, exitUsage, tc.want)
		}
		oneLine(t, "fence "+strings.Join(tc.args, " "), stderr)
	}
}

// durationFlags returns, by command, the flags of every command that take
// a duration.
func durationFlags(t *testing.T) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	for _, c := range commands {
		fs := commandFlags(c.name)
		if fs == nil {
			continue
		}
		fs.VisitAll(func(f *flag.Flag) {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, ok := g.Get().(time.Duration); ok {
					found[c.name] = append(found[c.name], f.Name)
				}
			}
		})
	}
	for _, want := range []string{"serve", "lock", "acquire", "renew", "demo", "bench", "chaos", "migrate", "bump"} {
		if len(found[want]) == 0 {
			t.Fatalf("no duration flag found in %s: %v", want, found)
		}
	}
	return found
}

// TestDurationNeedsUnit checks every duration flag, and its environment
// twin, with a number and no unit.
func TestDurationNeedsUnit(t *testing.T) {
	flags := durationFlags(t)
	for cmd, names := range flags {
		for _, name := range names {
			code, _, stderr := runFence(t.Context(), "", cmd, "--"+name, "30")
			want := fmt.Sprintf(`--%s "30": a duration needs a unit, e.g. 30s`, name)
			if code != exitUsage || !strings.Contains(stderr, want) {
				t.Errorf("fence %s --%s 30: exit %d, stderr %q; want %d and %q", cmd, name, code, stderr, exitUsage, want)
			}
		}
	}
	for cmd, names := range flags {
		if cmd == "chaos-worker" {
			continue // its flags have no environment twins
		}
		for _, name := range names {
			t.Run(cmd+"/"+envName(name), func(t *testing.T) {
				t.Setenv(envName(name), "30")
				code, _, stderr := runFence(t.Context(), "", cmd)
				want := envName(name) + `="30": a duration needs a unit, e.g. 30s`
				if code != exitUsage || !strings.Contains(stderr, want) {
					t.Errorf("%s=30 fence %s: exit %d, stderr %q; want %d and %q", envName(name), cmd, code, stderr, exitUsage, want)
				}
				oneLine(t, cmd, stderr)
			})
		}
	}
}

// TestOutputFlag checks that -o and --output are one flag, and that
// FENCE_OUTPUT fills it only when neither is given.
func TestOutputFlag(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	status := func(t *testing.T, args ...string) string {
		t.Helper()
		code, stdout, stderr := runFence(t.Context(), "", append([]string{"status", "orders", "--addr", url}, args...)...)
		if code != 0 {
			t.Fatalf("fence status %s: exit %d, %s", strings.Join(args, " "), code, stderr)
		}
		if json.Valid([]byte(stdout)) {
			return "json"
		}
		return "text"
	}
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, "text"},
		{"", []string{"-o", "json"}, "json"},
		{"", []string{"--output", "json"}, "json"},
		{"", []string{"--output=json"}, "json"},
		{"json", nil, "json"},
		{"json", []string{"-o", "text"}, "text"},
		{"json", []string{"--output", "text"}, "text"},
		{"json", []string{"-output", "text"}, "text"},
		{"text", []string{"-o", "json"}, "json"},
	} {
		t.Run(tc.env+strings.Join(tc.args, ""), func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("FENCE_OUTPUT", tc.env)
			}
			if got := status(t, tc.args...); got != tc.want {
				t.Errorf("FENCE_OUTPUT=%q fence status %s: %s output, want %s", tc.env, strings.Join(tc.args, " "), got, tc.want)
			}
		})
	}
	// -o has no environment twin of its own.
	t.Run("FENCE_O", func(t *testing.T) {
		t.Setenv("FENCE_O", "json")
		if got := status(t); got != "text" {
			t.Errorf("FENCE_O=json fence status: %s output, want text", got)
		}
	})
	// The same for every flag with a twin: the command line wins.
	t.Run("EveryFlag", func(t *testing.T) {
		t.Setenv("FENCE_ADDR", "http://"+closedAddr(t))
		if got := status(t, "-o", "json"); got != "json" {
			t.Errorf("fence status with FENCE_ADDR and --addr: %s", got)
		}
	})
}

func TestVersion(t *testing.T) {
	info := buildinfo.Get()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runFence(t.Context(), "", args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "fence "+info.Version+"\n") {
			t.Fatalf("fence %s: exit %d, stderr %q, stdout %q", args[0], code, stderr, stdout)
		}
		for _, want := range []string{"\ncommit  ", "\ndate    ", "\ngo      " + info.GoVersion + "\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("fence %s lacks %q:\n%s", args[0], want, stdout)
			}
		}
	}
	for _, args := range [][]string{{"version", "-o", "json"}, {"--version", "--output", "json"}} {
		code, stdout, _ := runFence(t.Context(), "", args...)
		var got buildinfo.Info
		if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || got != info {
			t.Errorf("fence %s: exit %d, %q (%v); want %+v", strings.Join(args, " "), code, stdout, err, info)
		}
		var keys map[string]any
		json.Unmarshal([]byte(stdout), &keys)
		for _, k := range []string{"version", "commit", "date", "go_version"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("fence %s lacks %q: %s", strings.Join(args, " "), k, stdout)
			}
		}
	}
	if code, _, _ := runFence(t.Context(), "", "version", "extra"); code != exitUsage {
		t.Errorf("fence version extra: exit %d, want %d", code, exitUsage)
	}
}

// TestAddrWithoutScheme checks that a server address may omit http://, on
// the command line, in FENCE_ADDR and in lists.
func TestAddrWithoutScheme(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	hostport := strings.TrimPrefix(url, "http://")
	ok := func(t *testing.T, args ...string) {
		t.Helper()
		code, stdout, stderr := runFence(t.Context(), "", args...)
		if code != 0 || !strings.Contains(stdout, "orders: free") {
			t.Fatalf("fence %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	ok(t, "status", "orders", "--addr", hostport)
	ok(t, "status", "orders", "--addr", closedAddr(t)+","+hostport)
	t.Run("Env", func(t *testing.T) {
		t.Setenv("FENCE_ADDR", hostport)
		ok(t, "status", "orders")
	})
	t.Run("Lock", func(t *testing.T) {
		code, stdout, stderr := runFence(t.Context(), "", "lock", "orders", "--addr", hostport, "--", "sh", "-c", `echo "$FENCE_ADDR"`)
		if code != 0 || stdout != url+"\n" {
			t.Fatalf("fence lock: exit %d, stdout %q, stderr %q; want FENCE_ADDR=%s", code, stdout, stderr, url)
		}
	})
	code, _, stderr := runFence(t.Context(), "", "status", "orders", "--addr", "ftp://"+hostport)
	if want := `--addr "ftp://` + hostport + `": want host:port, http://host:port or https://host:port`; code != exitUsage || !strings.Contains(stderr, want) {
		t.Fatalf("fence status --addr ftp://...: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// TestMessages runs commands into the usual failures and checks that each
// is told in one sentence, without the layers the error passed through.
func TestMessages(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Acquire(ctx, "held", "a", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	// orders: token 1 released, then token 2 wrote, which fences token 1.
	a, err := c.Acquire(ctx, "orders", "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, "orders", a.Token); err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, "orders", "b", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "orders", "total", []byte("2"), b.Token, fence.Cond{}); err != nil {
		t.Fatal(err)
	}
	down := closedAddr(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "orders", "--addr", down}, exitFailure, "fence: cannot reach the fence server at http://" + down + ": connection refused\n"},
		{[]string{"put", "orders", "total", "1", "--token", "1", "--addr", url}, exitFenced, `fence: token 1 is stale: a newer holder fenced "orders" with token 2; nothing was written` + "\n"},
		{[]string{"put", "orders", "total", "1", "--token", "9", "--addr", url}, exitFenced, `fence: token 9 was never issued for "orders" (the last token issued is 2)` + "\n"},
		{[]string{"acquire", "held", "--addr", url}, exitNotHeld, `fence: lock held by another holder: "held" (its lease expires in `},
		{[]string{"lock", "held", "--addr", url, "--", "true"}, exitNotHeld, `fence: lock: lock held by another holder: "held" (its lease expires in `},
		{[]string{"release", "orders", "--token", "1", "--addr", url}, exitRejected, `fence: lease lost: token 1 no longer holds "orders" (token 2 does now)` + "\n"},
		{[]string{"put", "orders", "total", "3", "--token", "2", "--if-match", "9", "--addr", url}, exitRejected, "fence: precondition failed: key is at revision 1, not 9\n"},
		{[]string{"get", "orders", "nothing", "--addr", url}, exitRejected, `fence: not found: key "nothing"` + "\n"},
	} {
		// A stopped server is retried until the context ends.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		code, _, stderr := runFence(ctx, "", tc.args...)
		cancel()
		name := "fence " + strings.Join(tc.args, " ")
		if code != tc.code || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", name, code, stderr, tc.code, tc.want)
		}
		oneLine(t, name, stderr)
	}

	t.Run("Auth", func(t *testing.T) {
		authFile := filepath.Join(t.TempDir(), "auth")
		if err := os.WriteFile(authFile, []byte("app "+auth.HashToken("s3cret")+" read:*\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		addr := startServe(t, "--auth-file", authFile)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"status", "orders"}, "fence: unauthorized: no bearer token; give the server's token in FENCE_AUTH_TOKEN (or --auth-token)\n"},
			{[]string{"status", "orders", "--auth-token", "wrong"}, "fence: unauthorized: unknown bearer token; give the server's token in FENCE_AUTH_TOKEN (or --auth-token)\n"},
			{[]string{"acquire", "orders", "--auth-token", "s3cret"}, `fence: forbidden: "app" has no lock permission on "orders"` + "\n"},
		} {
			code, _, stderr := runFence(t.Context(), "", append(tc.args, "--addr", addr)...)
			name := "fence " + strings.Join(tc.args, " ")
			if code != exitRejected || stderr != tc.want {
				t.Errorf("%s: exit %d, stderr %q; want %d and %q", name, code, stderr, exitRejected, tc.want)
			}
			oneLine(t, name, stderr)
		}
	})
}

// TestTokenOfOtherResource checks that FENCE_TOKEN, which fence lock sets
// for FENCE_RESOURCE, is not used for another resource.
func TestTokenOfOtherResource(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, res := range []string{"orders", "stock", "items"} {
		if l, err := c.Acquire(ctx, res, "h", time.Minute, 0); err != nil || l.Token != 1 {
			t.Fatalf("acquire %s: %+v, %v; want token 1", res, l, err)
		}
	}
	// items: the fence is at 2, which a claim with token 1 would not pass.
	if err := c.Release(ctx, "items", 1); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Acquire(ctx, "items", "h2", time.Minute, 0); err != nil || l.Token != 2 {
		t.Fatalf("acquire items: %+v, %v; want token 2", l, err)
	}
	const want = "fence: put: FENCE_TOKEN is the token of FENCE_RESOURCE=orders, not of stock: pass --token\n"
	t.Run("Env", func(t *testing.T) {
		t.Setenv("FENCE_TOKEN", "1")
		t.Setenv("FENCE_RESOURCE", "orders")
		code, _, stderr := runFence(ctx, "", "put", "stock", "k", "v", "--addr", url)
		if code != exitUsage || stderr != want {
			t.Errorf("fence put stock: exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, want)
		}
		for _, args := range [][]string{{"delete", "stock", "k"}, {"renew", "stock"}, {"release", "stock"}} {
			if code, _, stderr := runFence(ctx, "", append(args, "--addr", url)...); code != exitUsage || !strings.Contains(stderr, "FENCE_TOKEN is the token of FENCE_RESOURCE=orders, not of stock") {
				t.Errorf("fence %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
			}
		}
		if _, err := c.Get(ctx, "stock", "k"); err == nil {
			t.Error("stock/k was written with the token of orders")
		}
		// Reading the fence of another resource does not claim it.
		if code, stdout, _ := runFence(ctx, "", "fence", "items", "--addr", url); code != 0 || stdout != "items: last fence 2\n" {
			t.Errorf("fence fence items: exit %d, %q; want it read, not claimed", code, stdout)
		}
		// The lock's own resource takes it, and --token is taken as given.
		if code, _, stderr := runFence(ctx, "", "put", "orders", "k", "v", "--addr", url); code != 0 {
			t.Errorf("fence put orders: exit %d, %s", code, stderr)
		}
		if code, _, stderr := runFence(ctx, "", "put", "stock", "k", "v", "--token", "1", "--addr", url); code != 0 {
			t.Errorf("fence put stock --token 1: exit %d, %s", code, stderr)
		}
	})
	t.Run("Lock", func(t *testing.T) {
		bin := fenceBinary(t)
		if err := c.Release(ctx, "orders", 1); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runFence(ctx, "", "lock", "orders", "--addr", url, "--", "sh", "-c", `"$0" put stock k2 v`, bin)
		if code != exitUsage || !strings.Contains(stderr, "FENCE_TOKEN is the token of FENCE_RESOURCE=orders, not of stock: pass --token") {
			t.Errorf("fence lock orders -- fence put stock: exit %d, stderr %q", code, stderr)
		}
	})
}

// TestDemoIgnoresFenceAddr checks that an exported FENCE_ADDR does not point
// fence demo and fence chaos at a server: only --addr does.
func TestDemoIgnoresFenceAddr(t *testing.T) {
	env := "http://" + closedAddr(t)
	t.Setenv("FENCE_ADDR", env)
	stdout, stderr, err := runDemo(t, "--ttl", "200ms", "-o", "json")
	if err != nil {
		t.Fatalf("fence demo with FENCE_ADDR=%s: %v\n%s", env, err, stderr)
	}
	var got demoJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || !got.Embedded || !got.OK {
		t.Fatalf("fence demo: %s (%v); want an embedded run", stdout, err)
	}
	want := "fence demo: using an embedded fence server in a temporary directory (FENCE_ADDR=" + env + " is not read: give --addr for that server)\n"
	if stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for _, cmd := range []string{"demo", "chaos"} {
		_, help, _ := runFence(t.Context(), "", cmd, "--help")
		if !strings.Contains(help, "FENCE_ADDR is not read") || !strings.Contains(help, "except --addr") {
			t.Errorf("fence %s --help does not say that FENCE_ADDR is not read:\n%s", cmd, help)
		}
	}

	t.Run("Chaos", func(t *testing.T) {
		fenceBinary(t) // chaos starts its server and clients from it
		code, _, stderr := runFence(t.Context(), "", "chaos", "--duration", "1s", "--faults", "", "--clients", "2", "--resources", "1", "--keys", "1")
		if code != 0 {
			t.Fatalf("fence chaos with FENCE_ADDR=%s: exit %d\n%s", env, code, stderr)
		}
		if !strings.HasPrefix(stderr, "fence chaos: using an embedded fence server in a temporary directory (FENCE_ADDR="+env+" is not read") {
			t.Errorf("stderr does not start with the embedded server:\n%s", stderr)
		}
	})
}

// TestCompletion_BashDoubleDash asks the bash script what it completes
// around "--": a word that starts with -- is one of the command's long
// flags; after a lone -- separator the words are arguments, never fence's
// flags, and for fence lock the first of them is a command.
func TestCompletion_BashDoubleDash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: the bash script's completions not checked")
	}
	code, script, stderr := runFence(t.Context(), "", "completion", "bash")
	if code != 0 {
		t.Fatalf("fence completion bash: exit %d\n%s", code, stderr)
	}
	path := filepath.Join(t.TempDir(), "fence.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		words     []string // the command line, the last word being completed
		want      []string // in the completions
		wantNot   []string // not in them
		wantEmpty bool     // none: bash falls back to file names (-o default)
	}{
		{words: []string{"fence", "serve", "--"}, want: []string{"--listen", "--data", "--log-level"}},
		{words: []string{"fence", "status", "--"}, want: []string{"--addr", "--output"}, wantNot: []string{"-o"}},
		{words: []string{"fence", "lock", "orders", "--"}, want: []string{"--ttl", "--wait"}},
		{words: []string{"fence", "lock", "orders", "--", "ech"}, want: []string{"echo"}, wantNot: []string{"--ttl"}},
		{words: []string{"fence", "lock", "--ttl", "5s", "orders", "--", ""}, want: []string{"echo"}, wantNot: []string{"--ttl"}},
		{words: []string{"fence", "lock", "orders", "--", "ls", "-"}, wantEmpty: true},
		{words: []string{"fence", "lock", "orders", "--", "ls", ""}, wantEmpty: true},
		{words: []string{"fence", "put", "--", "-"}, wantEmpty: true},
	}
	var probe strings.Builder
	probe.WriteString(`source "$1"
c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _fence; printf '%s\n' "${COMPREPLY[*]}"; }
`)
	for _, tc := range cases {
		probe.WriteString("c")
		for _, w := range tc.words {
			probe.WriteString(" '" + w + "'")
		}
		probe.WriteString("\n")
	}
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", probe.String(), "fence-probe", path).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines of completions for %d command lines:\n%s", len(lines), len(cases), out)
	}
	for i, tc := range cases {
		got := strings.Fields(lines[i])
		line := strings.Join(tc.words, " ")
		if tc.wantEmpty && len(got) > 0 {
			t.Errorf("%q completes %q, want nothing (file names)", line, lines[i])
		}
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes %.200q, want %s in it", line, lines[i], w)
			}
		}
		for _, w := range tc.wantNot {
			if slices.Contains(got, w) {
				t.Errorf("%q completes %.200q, want no %s", line, lines[i], w)
			}
		}
	}
}

func TestCompletion(t *testing.T) {
	names := visibleCommands()
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			code, script, stderr := runFence(t.Context(), "", "completion", shell)
			if code != 0 || stderr != "" || len(script) < 1000 {
				t.Fatalf("fence completion %s: exit %d, %d bytes, stderr %q", shell, code, len(script), stderr)
			}
			for _, name := range names {
				if !strings.Contains(script, name) {
					t.Errorf("the %s script does not mention %s", shell, name)
				}
			}
			// Every flag of every command, from its flag set.
			for _, name := range names {
				fs := commandFlags(name)
				if fs == nil {
					t.Fatalf("no flag set for %s", name)
				}
				fs.VisitAll(func(f *flag.Flag) {
					if f.Usage != "" && !strings.Contains(script, f.Name) {
						t.Errorf("the %s script lacks %s's flag %s", shell, name, f.Name)
					}
				})
			}
			path := filepath.Join(t.TempDir(), "fence."+shell)
			if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			bin, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("%s is not installed: syntax not checked", shell)
			}
			if out, err := exec.Command(bin, "-n", path).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
			// What the shell completes, where it can be asked without a terminal.
			var probe string
			switch shell {
			case "bash":
				probe = `source "$1"
c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _fence; echo "${COMPREPLY[*]}"; }
c fence pu; c fence lock --conf; c fence put -o ''; c fence help lo; c fence completion f; c fence chaos --workload ''; c fence bench --workload ''`
			case "fish":
				probe = `source $argv[1]
complete -C'fence pu'; complete -C'fence lock --conf'; complete -C'fence put -o '; complete -C'fence help lo'; complete -C'fence completion f'; complete -C'fence chaos --workload '; complete -C'fence bench --workload '`
			case "zsh":
				probe = `autoload -U compinit; compinit -u -d "$2"; source "$1"; print -- $_comps[fence]`
			}
			out, err := exec.Command(bin, "-c", probe, "fence-probe", path, filepath.Join(t.TempDir(), "zcompdump")).CombinedOutput()
			if shell == "fish" {
				out, err = exec.Command(bin, "-c", probe, path).CombinedOutput()
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", shell, err, out)
			}
			// Each command's own values of a flag it shares a name with another's.
			wants := []string{"put", "--conflict-exit-code", "json", "lock", "fish", "semaphore", "contended"}
			if shell == "zsh" {
				wants = []string{"_fence"}
			}
			for _, want := range wants {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s completes %q, want %q in it", shell, out, want)
				}
			}
		})
	}
	if code, _, stderr := runFence(t.Context(), "", "completion", "tcsh"); code != exitUsage || !strings.Contains(stderr, "want bash, zsh or fish") {
		t.Errorf("fence completion tcsh: exit %d, %q", code, stderr)
	}
}
