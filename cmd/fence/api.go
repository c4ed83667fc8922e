package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/watch"
	"github.com/fence-lock/fence/wire"
)

// The commands in this file are one API call each. --token has the
// environment twin FENCE_TOKEN, which `fence lock` sets for its command, so
// that inside it `fence put orders total 42` carries the lock's token.

// tokenFlag is a flag.Value for a fencing token.
type tokenFlag struct{ fence.Token }

func (t *tokenFlag) String() string {
	if t.Token == 0 {
		return ""
	}
	return t.Token.String()
}

func (t *tokenFlag) Set(s string) (err error) {
	t.Token, err = fence.ParseToken(s)
	return err
}

// apiCommand is what the API commands share: the client flags, the parsed
// positional arguments and a connected client.
type apiCommand struct {
	cfg  clientConfig
	fs   *flag.FlagSet
	args []string
	api  *client.API
	io   stdio
	// otherToken is FENCE_RESOURCE when FENCE_TOKEN was ignored because it
	// is the token of another resource than the one written.
	otherToken string
}

// newAPICommand prepares command name; register adds its own flags.
func newAPICommand(io stdio, name, synopsis, examples string, register func(fs *flag.FlagSet)) *apiCommand {
	c := &apiCommand{io: io, fs: newFlagSet(name, synopsis, examples, io.out)}
	addClientFlags(c.fs, &c.cfg)
	if register != nil {
		register(c.fs)
	}
	return c
}

// parse parses args, which must hold exactly the named positional arguments
// (optional ones, in brackets, may be missing at the end), and connects.
func (c *apiCommand) parse(args []string, names ...string) error {
	positional, command, dashdash, err := parseArgs(c.fs, args)
	if err != nil {
		return err
	}
	if dashdash {
		positional = append(positional, command...)
	}
	required := 0
	for _, n := range names {
		if n[0] != '[' {
			required++
		}
	}
	if len(positional) < required || len(positional) > len(names) {
		return wantArgs(c.fs.Name(), positional, names...)
	}
	if err := c.cfg.validateOutput(); err != nil {
		return err
	}
	c.args = positional
	if c.cfg.Addr, err = cleanAddr(c.cfg.Addr); err != nil {
		return err
	}
	c.api, err = client.NewAPI(c.cfg.Addr)
	if err != nil {
		return addrError(err)
	}
	c.api.AuthToken = c.cfg.AuthToken
	hc, err := c.cfg.httpClient()
	if err != nil {
		return &usageError{err}
	}
	if hc != nil {
		c.api.HTTPClient = hc
	}
	return nil
}

// lockToken returns --token for a call on resource. Its environment twin
// FENCE_TOKEN, which fence lock sets for its command, is the token of the
// lock's resource, FENCE_RESOURCE: for another resource it is ignored, and
// a command that needs a token then says so (see requireToken).
func (c *apiCommand) lockToken(t *tokenFlag, resource string) fence.Token {
	if setOnCommandLine(c.fs, "token") {
		return t.Token
	}
	if lockRes, ok := os.LookupEnv("FENCE_RESOURCE"); ok && lockRes != resource {
		if _, ok := os.LookupEnv("FENCE_TOKEN"); ok {
			c.otherToken = lockRes
			return 0
		}
	}
	return t.Token
}

// requireToken returns the token for a write to resource, which must be
// given by --token, or by FENCE_TOKEN for the resource of FENCE_RESOURCE.
func (c *apiCommand) requireToken(t *tokenFlag, resource string) (fence.Token, error) {
	token := c.lockToken(t, resource)
	switch {
	case token != 0:
		return token, nil
	case c.otherToken != "":
		return 0, &usageError{fmt.Errorf("%s: FENCE_TOKEN is the token of FENCE_RESOURCE=%s, not of %s: pass --token", c.fs.Name(), c.otherToken, resource)}
	}
	return 0, &usageError{fmt.Errorf("%s: --token (or FENCE_TOKEN) is required", c.fs.Name())}
}

// print writes v as JSON with -o json, else the text.
func (c *apiCommand) print(v any, text string) error {
	if c.cfg.Output == "json" {
		return printJSON(c.io.out, v)
	}
	_, err := fmt.Fprintln(c.io.out, text)
	return err
}

type leaseJSON struct {
	Resource  string      `json:"resource"`
	Holder    string      `json:"holder"`
	Token     fence.Token `json:"token"`
	TTLMS     int64       `json:"ttl_ms"`
	ExpiresAt string      `json:"expires_at"`
	Sequencer string      `json:"sequencer,omitempty"`
}

func leaseOut(l fence.Lease) (leaseJSON, string) {
	j := leaseJSON{l.Resource, l.Holder, l.Token, l.TTL.Milliseconds(), l.Expires.UTC().Format(time.RFC3339Nano), l.Sequencer}
	text := fmt.Sprintf("%s: token %d, holder %s, ttl %s, expires %s", l.Resource, l.Token, l.Holder, l.TTL, j.ExpiresAt)
	if l.Sequencer != "" {
		text += ", sequencer " + l.Sequencer
	}
	return j, text
}

func acquireCmd(ctx context.Context, args []string, std stdio) error {
	var holder string
	var ttl, wait time.Duration
	c := newAPICommand(std, "acquire", "fence acquire RESOURCE [--holder ID] [--ttl 10s] [--wait 0s]",
		"  fence acquire orders --ttl 30s\n  TOKEN=$(fence acquire orders -o json | jq .token)\n",
		func(fs *flag.FlagSet) {
			fs.StringVar(&holder, "holder", "", "holder `id` (default: a new random id; keep it to retry or release)")
			fs.DurationVar(&ttl, "ttl", fence.DefaultTTL, "lease time to live")
			fs.DurationVar(&wait, "wait", 0, "how long to wait if another holder has the lock")
		})
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	if holder == "" {
		holder = fence.NewHolderID()
	}
	l, err := c.api.Acquire(ctx, c.args[0], holder, ttl, wait)
	if err != nil {
		return apiWriteError(err)
	}
	return c.print(leaseOut(l))
}

func renewCmd(ctx context.Context, args []string, std stdio) error {
	var token tokenFlag
	var ttl time.Duration
	c := newAPICommand(std, "renew", "fence renew RESOURCE --token N [--ttl D]",
		"  fence renew orders --token 42\n", func(fs *flag.FlagSet) {
			fs.Var(&token, "token", "the lease's fencing `token`")
			fs.DurationVar(&ttl, "ttl", 0, "new TTL (default: the lease's own)")
		})
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	tok, err := c.requireToken(&token, c.args[0])
	if err != nil {
		return err
	}
	l, err := c.api.Renew(ctx, c.args[0], tok, ttl)
	if err != nil {
		return apiWriteError(err)
	}
	return c.print(leaseOut(l))
}

func releaseCmd(ctx context.Context, args []string, std stdio) error {
	var token tokenFlag
	c := newAPICommand(std, "release", "fence release RESOURCE --token N", "  fence release orders --token 42\n",
		func(fs *flag.FlagSet) { fs.Var(&token, "token", "the lease's fencing `token`") })
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	tok, err := c.requireToken(&token, c.args[0])
	if err != nil {
		return err
	}
	if err := c.api.Release(ctx, c.args[0], tok); err != nil {
		return apiWriteError(err)
	}
	return c.print(map[string]any{"resource": c.args[0], "released": true}, c.args[0]+": released")
}

func statusCmd(ctx context.Context, args []string, std stdio) error {
	c := newAPICommand(std, "status", "fence status RESOURCE", "  fence status orders\n", nil)
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	st, err := c.api.Status(ctx, c.args[0])
	if err != nil {
		return apiError(err)
	}
	j := map[string]any{"resource": st.Resource, "held": st.Held, "last_token": st.LastToken}
	text := fmt.Sprintf("%s: free, last token %d", st.Resource, st.LastToken)
	if st.Held {
		j["holder"], j["token"], j["expires_at"] = st.Holder, st.Token, st.Expires.UTC().Format(time.RFC3339Nano)
		text = fmt.Sprintf("%s: held %s with token %d until %s, last token %d",
			st.Resource, heldBy(j, st), st.Token, st.Expires.UTC().Format(time.RFC3339Nano), st.LastToken)
		if ref := st.Session; !ref.IsZero() {
			j["session"] = map[string]any{"resource": ref.Resource, "token": ref.Token}
			text += fmt.Sprintf(", in session %s (token %d)", ref.Resource, ref.Token)
		}
	}
	return c.print(j, text)
}

func lsCmd(ctx context.Context, args []string, std stdio) error {
	var limit int
	c := newAPICommand(std, "ls", "fence ls [PREFIX] [--limit N]", "  fence ls\n  fence ls jobs/ -o json\n",
		func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "limit", 0, "list at most `N` locks (default: all of them, a page at a time)")
		})
	if err := c.parse(args, "[PREFIX]"); err != nil {
		return err
	}
	if limit < 0 {
		return &usageError{fmt.Errorf("ls: --limit %d: want a positive number", limit)}
	}
	prefix := ""
	if len(c.args) == 1 {
		prefix = c.args[0]
	}
	all, err := allPages(limit, func(after string, page int) ([]fence.LockStatus, string, error) {
		return c.api.List(ctx, prefix, after, page)
	})
	if err != nil {
		return err
	}
	j := make([]map[string]any, 0, len(all))
	var text strings.Builder
	now := time.Now()
	for _, l := range all {
		m := map[string]any{"resource": l.Resource, "holder": l.Holder, "token": l.Token,
			"expires_at": l.Expires.UTC().Format(time.RFC3339Nano), "waiters": l.Waiters}
		by := heldBy(m, l)
		in := ""
		if ref := l.Session; !ref.IsZero() {
			m["session"] = map[string]any{"resource": ref.Resource, "token": ref.Token}
			in = "\tin session " + ref.Resource
		}
		j = append(j, m)
		fmt.Fprintf(&text, "%s\theld %s\ttoken %d\texpires in %s\t%d waiting%s\n",
			l.Resource, by, l.Token, l.Expires.Sub(now).Round(time.Millisecond), l.Waiters, in)
	}
	if len(all) == 0 {
		text.WriteString("no lock held")
		if prefix != "" {
			fmt.Fprintf(&text, " under %q", prefix)
		}
	}
	return c.print(map[string]any{"locks": j}, strings.TrimSuffix(text.String(), "\n"))
}

// allPages reads a listing page after page, at most limit items (0: all
// of them): fetch returns the page of at most page items after after, and
// the after of the next ("" on the last).
func allPages[T any](limit int, fetch func(after string, page int) ([]T, string, error)) ([]T, error) {
	var all []T
	after := ""
	for {
		page := fence.MaxListLimit
		if limit > 0 {
			page = min(page, limit-len(all))
		}
		items, next, err := fetch(after, page)
		if err != nil {
			return nil, apiError(err)
		}
		all = append(all, items...)
		if next == "" || limit > 0 && len(all) >= limit {
			return all, nil
		}
		after = next
	}
}

func fencesCmd(ctx context.Context, args []string, std stdio) error {
	var limit int
	c := newAPICommand(std, "fences", "fence fences [PREFIX] [--limit N]", "  fence fences\n  fence fences orders/ -o json\n",
		func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "limit", 0, "list at most `N` resources (default: all of them, a page at a time)")
		})
	if err := c.parse(args, "[PREFIX]"); err != nil {
		return err
	}
	if limit < 0 {
		return &usageError{fmt.Errorf("fences: --limit %d: want a positive number", limit)}
	}
	prefix := ""
	if len(c.args) == 1 {
		prefix = c.args[0]
	}
	all, err := allPages(limit, func(after string, page int) ([]fence.FenceStatus, string, error) {
		return c.api.Fences(ctx, prefix, after, page)
	})
	if err != nil {
		return err
	}
	j := make([]map[string]any, 0, len(all))
	var text strings.Builder
	for _, f := range all {
		j = append(j, map[string]any{"resource": f.Resource, "last_token": f.LastToken, "last_fence": f.LastFence})
		fmt.Fprintf(&text, "%s\tlast token %d\tlast fence %d\n", f.Resource, f.LastToken, f.LastFence)
	}
	if len(all) == 0 {
		text.WriteString("no resource fenced")
		if prefix != "" {
			fmt.Fprintf(&text, " under %q", prefix)
		}
	}
	return c.print(map[string]any{"fences": j}, strings.TrimSuffix(text.String(), "\n"))
}

func watchCmd(ctx context.Context, args []string, std stdio) error {
	var count int
	c := newAPICommand(std, "watch", "fence watch [PREFIX] [--count N]",
		"  fence watch\n  fence watch jobs/ -o json   # one JSON object per line\n  fence watch leader/ --count 1\n",
		func(fs *flag.FlagSet) {
			fs.IntVar(&count, "count", 0, "stop after `N` events (default: watch until interrupted)")
		})
	if err := c.parse(args, "[PREFIX]"); err != nil {
		return err
	}
	if count < 0 {
		return &usageError{fmt.Errorf("watch: --count %d: want a positive number", count)}
	}
	prefix := ""
	if len(c.args) == 1 {
		prefix = c.args[0]
	}
	w := c.api.Watch(ctx, prefix, "")
	defer w.Close()
	for n := 0; count == 0 || n < count; n++ {
		e, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return apiError(err)
		}
		if err := c.print(eventJSON(e), eventText(e)); err != nil {
			return err
		}
	}
	return nil
}

// eventJSON is e as fence watch -o json prints it: the API's members, and
// its id.
func eventJSON(e watch.Event) map[string]any {
	j := map[string]any{"id": e.ID, "type": e.Type, "time": e.Time.UTC().Format(time.RFC3339Nano)}
	for k, v := range map[string]string{"resource": e.Resource, "holder": e.Holder, "key": e.Key, "op": e.Op, "detail": e.Detail} {
		if v != "" {
			j[k] = v
		}
	}
	if e.Token != 0 {
		j["token"] = e.Token
	}
	if e.LastFence != 0 {
		j["last_fence"] = e.LastFence
	}
	if !e.ExpiresAt.IsZero() {
		j["expires_at"] = e.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	if e.Shared {
		j["mode"] = "shared"
	}
	return j
}

// eventText is e as one line for people.
func eventText(e watch.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%s\t%s", e.Time.Local().Format("15:04:05.000"), e.Type, e.Resource)
	if e.Holder != "" {
		fmt.Fprintf(&b, "\tholder %s", e.Holder)
		if e.Shared {
			b.WriteString(" (shared)")
		}
	}
	if e.Token != 0 {
		fmt.Fprintf(&b, "\ttoken %d", e.Token)
	}
	if e.LastFence != 0 {
		fmt.Fprintf(&b, "\tlast fence %d", e.LastFence)
	}
	if e.Op != "" {
		fmt.Fprintf(&b, "\t%s %s", e.Op, e.Key)
	}
	if e.Detail != "" {
		b.WriteString("\t" + e.Detail)
	}
	if e.Type == watch.RevokeAsked && !e.ExpiresAt.IsZero() {
		b.WriteString("\trevoked at " + e.ExpiresAt.UTC().Format(time.RFC3339Nano) + " unless released")
	}
	return b.String()
}

func healthzCmd(ctx context.Context, args []string, std stdio) error {
	timeout := 2 * time.Second
	c := newAPICommand(std, "healthz", "fence healthz [--timeout D]",
		"  fence healthz && echo ready\n  fence healthz --addr https://127.0.0.1:7700 --cacert ca.pem   # a container's health check\n",
		func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", timeout, "how long to wait for the answer")
		})
	if err := c.parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := c.api.Addrs()[0]
	req, err := http.NewRequestWithContext(ctx, "GET", addr+"/readyz", nil)
	if err != nil {
		return &usageError{err}
	}
	hc := c.api.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("healthz: %s is not answering: %w", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s is not ready: %s", addr, wire.ProblemError(resp.StatusCode, body))
	}
	return c.print(map[string]any{"addr": addr, "status": "ready"}, addr+" is ready")
}

func clusterCmd(ctx context.Context, args []string, std stdio) error {
	c := newAPICommand(std, "cluster", "fence cluster", "  fence cluster\n  FENCE_ADDR=http://a:7700,http://b:7700 fence cluster -o json\n", nil)
	if err := c.parse(args); err != nil {
		return err
	}
	st, err := c.api.Cluster(ctx)
	if err != nil {
		return apiError(err)
	}
	leader := st.Leader
	if leader == "" {
		leader = "(none)"
	}
	text := fmt.Sprintf("store %s, epoch %d, leader %s; this server (%s) is the %s", st.Store, st.Epoch, leader, c.api.Current(), st.Role)
	for _, s := range st.Servers {
		if s.URL != "" {
			text += fmt.Sprintf("\n  %s %s", s.URL, s.Role)
		}
	}
	return c.print(st, text)
}

func putCmd(ctx context.Context, args []string, std stdio) error {
	var token tokenFlag
	var ifMatch uint64
	var ifNoneMatch bool
	c := newAPICommand(std, "put", "fence put RESOURCE KEY [VALUE] --token N [--if-match REV | --if-none-match]",
		"  fence put orders total 42 --token 7\n  fence put orders report.json --token 7 < report.json\n",
		func(fs *flag.FlagSet) {
			fs.Var(&token, "token", "fencing `token` of the writer's lease")
			fs.Uint64Var(&ifMatch, "if-match", 0, "write only if the key is at this `revision`")
			fs.BoolVar(&ifNoneMatch, "if-none-match", false, "write only if the key does not exist")
		})
	if err := c.parse(args, "RESOURCE", "KEY", "[VALUE]"); err != nil {
		return err
	}
	tok, err := c.requireToken(&token, c.args[0])
	if err != nil {
		return err
	}
	var value []byte
	if len(c.args) == 3 {
		value = []byte(c.args[2])
	} else {
		if value, err = io.ReadAll(limitReader(c.io.in)); err != nil {
			return fmt.Errorf("put: reading the value from stdin: %w", err)
		}
	}
	res, err := c.api.Put(ctx, c.args[0], c.args[1], value, tok, fence.Cond{IfMatch: fence.Rev(ifMatch), IfAbsent: ifNoneMatch})
	if err != nil {
		return apiWriteError(err)
	}
	return c.print(map[string]any{"resource": c.args[0], "key": c.args[1], "revision": res.Rev, "fence": res.LastFence},
		fmt.Sprintf("%s/%s: revision %d, fence %d", c.args[0], c.args[1], res.Rev, res.LastFence))
}

// limitReader reads at most one byte more than a value may have, so that a
// huge stdin is refused by the server without being read whole.
func limitReader(r io.Reader) io.Reader { return io.LimitReader(r, fence.MaxValueSize+1) }

func getCmd(ctx context.Context, args []string, std stdio) error {
	c := newAPICommand(std, "get", "fence get RESOURCE KEY", "  fence get orders total\n  fence get orders total -o json\n", nil)
	if err := c.parse(args, "RESOURCE", "KEY"); err != nil {
		return err
	}
	item, err := c.api.Get(ctx, c.args[0], c.args[1])
	if err != nil {
		return apiError(err)
	}
	if c.cfg.Output == "json" {
		return printJSON(c.io.out, map[string]any{"resource": item.Resource, "key": item.Key, "revision": item.Rev,
			"token": item.Token, "value_base64": base64.StdEncoding.EncodeToString(item.Value)})
	}
	_, err = c.io.out.Write(item.Value) // the raw value, as stored
	return err
}

func deleteCmd(ctx context.Context, args []string, std stdio) error {
	var token tokenFlag
	var ifMatch uint64
	c := newAPICommand(std, "delete", "fence delete RESOURCE KEY --token N [--if-match REV]",
		"  fence delete orders total --token 7\n", func(fs *flag.FlagSet) {
			fs.Var(&token, "token", "fencing `token` of the writer's lease")
			fs.Uint64Var(&ifMatch, "if-match", 0, "delete only if the key is at this `revision`")
		})
	if err := c.parse(args, "RESOURCE", "KEY"); err != nil {
		return err
	}
	tok, err := c.requireToken(&token, c.args[0])
	if err != nil {
		return err
	}
	res, err := c.api.Delete(ctx, c.args[0], c.args[1], tok, fence.Cond{IfMatch: fence.Rev(ifMatch)})
	if err != nil {
		return apiWriteError(err)
	}
	return c.print(map[string]any{"resource": c.args[0], "key": c.args[1], "revision": res.Rev},
		fmt.Sprintf("%s/%s: deleted at revision %d", c.args[0], c.args[1], res.Rev))
}

func fenceCmd(ctx context.Context, args []string, std stdio) error {
	var token tokenFlag
	c := newAPICommand(std, "fence", "fence fence RESOURCE [--token N]",
		"  fence fence orders              # read the last fence\n  fence fence orders --token 7    # claim: fence off every older holder\n",
		func(fs *flag.FlagSet) { fs.Var(&token, "token", "claim the resource with this `token`") })
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	var last fence.Token
	if tok := c.lockToken(&token, c.args[0]); tok != 0 {
		res, err := c.api.Claim(ctx, c.args[0], tok)
		if err != nil {
			return apiWriteError(err)
		}
		last = res.LastFence
	} else {
		var err error
		if last, err = c.api.Fence(ctx, c.args[0]); err != nil {
			return apiError(err)
		}
	}
	return c.print(map[string]any{"resource": c.args[0], "last_fence": last}, fmt.Sprintf("%s: last fence %d", c.args[0], last))
}

func txnCmd(ctx context.Context, args []string, std stdio) error {
	c := newAPICommand(std, "txn", "fence txn < TXN.json",
		`  echo '{"fences":{"orders":7},"then":[{"op":"put","resource":"orders","key":"o-1","value":"paid"}]}' | fence txn
`, nil)
	if err := c.parse(args); err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(c.io.in, 4<<20+1))
	if err != nil {
		return fmt.Errorf("txn: reading stdin: %w", err)
	}
	t, err := httpapi.ParseTxn(body)
	if err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(tidy(err.Error()), "bad request: "), "txn: ")
		return &exitError{code: exitRejected, err: &userError{"txn: the transaction on stdin is not valid: " + msg, err}}
	}
	rev, err := c.api.Txn(ctx, t)
	if err != nil {
		return apiWriteError(err)
	}
	return c.print(map[string]any{"revision": rev}, "revision "+strconv.FormatUint(uint64(rev), 10))
}

// heldBy says who holds a lock: "by HOLDER", or "shared by A, B" for a
// shared group, whose mode and holders it adds to j, the JSON output.
func heldBy(j map[string]any, st fence.LockStatus) string {
	if !st.Shared {
		return "by " + st.Holder
	}
	j["mode"], j["holders"] = "shared", st.Holders
	delete(j, "holder")
	return "shared by " + strings.Join(st.Holders, ", ")
}
