package object

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// CheckRacers is how many writers race in the check's racing cases.
const CheckRacers = 8

// CheckCase is one case of the conformance check, and how it went.
type CheckCase struct {
	Name string        // short, stable: "create-race", "match-stale", ...
	What string        // what the store must do
	Err  error         // nil if the store did it; else what it did instead
	Took time.Duration // how long the case took
}

// CheckReport is what Check found: every case, in order.
type CheckReport struct {
	Cases []CheckCase
	Took  time.Duration // the whole check
}

// Failed returns the cases the store failed.
func (r CheckReport) Failed() []CheckCase {
	var failed []CheckCase
	for _, c := range r.Cases {
		if c.Err != nil {
			failed = append(failed, c)
		}
	}
	return failed
}

// checkCases are the cases of the check, in the order they run. Each gets
// a fresh scratch key.
var checkCases = []struct {
	name, what string
	run        func(c *checker, ctx context.Context, key string) error
}{
	{"metadata", "user metadata (the fence) written with an object reads back with it", (*checker).metadata},
	{"create-exists", "a write if absent (S3: If-None-Match: *) on an existing key is refused and changes nothing", (*checker).createExists},
	{"create-race", fmt.Sprintf("of %d racing writes if absent on a new key, exactly one succeeds", CheckRacers), (*checker).createRace},
	{"match-missing", "a write if matching a version (S3: If-Match) on a missing key never succeeds, and creates nothing", (*checker).matchMissing},
	{"match-stale", "a write if matching a stale version is refused and changes nothing", (*checker).matchStale},
	{"match-race", fmt.Sprintf("of %d racing writes if matching the current version, exactly one succeeds", CheckRacers), (*checker).matchRace},
	{"version-forms", "the current version is taken in every form the store may be given it (S3: ETags quoted and unquoted), and a stale one in none", (*checker).versionForms},
	{"delete-stale", "a delete if matching a stale version is refused and deletes nothing", (*checker).deleteStale},
	{"delete-current", "a delete if matching the current version deletes the object", (*checker).deleteCurrent},
}

// Check runs the conformance check of the store's conditional writes,
// which the guard's fencing stands on, with scratch objects under Prefix +
// ".fence-check/" that it deletes afterwards. It returns the report and,
// if a case failed, an error wrapping ErrEndpoint that names the first;
// if a request got no answer (the store unreachable), that error, and the
// report so far. A Guard runs it before its first write (unless
// TrustEndpoint).
func (g *Guard) Check(ctx context.Context) (CheckReport, error) {
	if g.store == nil {
		return CheckReport{}, g.errorf("check: the Guard has no store (create it with New)")
	}
	c := &checker{store: g.store}
	base := g.Prefix + ".fence-check/" + nonce() + "/"
	start := time.Now()
	var rep CheckReport
	defer c.cleanup()
	for _, cc := range checkCases {
		t := time.Now()
		err := cc.run(c, ctx, base+cc.name)
		rep.Cases = append(rep.Cases, CheckCase{Name: cc.name, What: cc.what, Err: err, Took: time.Since(t)})
		if errors.Is(err, ErrNoAnswer) {
			rep.Took = time.Since(start)
			return rep, g.errorf("check: case %s: %w", cc.name, err)
		}
	}
	rep.Took = time.Since(start)
	if failed := rep.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, f := range failed {
			names[i] = f.Name
		}
		return rep, fmt.Errorf("%w: %s failed %d of %d cases (%s); first, %s: %s: %v",
			ErrEndpoint, g.name, len(failed), len(rep.Cases), strings.Join(names, ", "), failed[0].Name, failed[0].What, failed[0].Err)
	}
	return rep, nil
}

// checker runs the cases, and remembers the keys to delete.
type checker struct {
	store Store
	mu    sync.Mutex
	keys  []string
}

// put writes body to key if cond holds: its new version, or refused true
// if the condition failed (or, with IfMatch, the object was missing); an
// error is any other answer, or no answer (wrapping ErrNoAnswer).
func (c *checker) put(ctx context.Context, key, body string, meta map[string]string, cond Cond) (v Version, refused bool, err error) {
	c.note(key)
	v, err = c.store.Put(ctx, key, []byte(body), meta, cond)
	switch {
	case err == nil:
		return v, false, nil
	case errors.Is(err, ErrConditionFailed), cond.IfMatch != "" && errors.Is(err, ErrNotFound):
		return "", true, nil
	}
	return "", false, err
}

// get returns key's body and metadata, found false if it is absent.
func (c *checker) get(ctx context.Context, key string) (body string, meta map[string]string, found bool, err error) {
	b, _, meta, err := c.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	return string(b), meta, true, nil
}

func (c *checker) note(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.keys {
		if k == key {
			return
		}
	}
	c.keys = append(c.keys, key)
}

// cleanup deletes the scratch objects, best effort, with a context of its
// own.
func (c *checker) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	for _, k := range c.keys {
		_ = c.store.Delete(ctx, k, Cond{})
	}
}

// create writes body to a new key and returns its version.
func (c *checker) create(ctx context.Context, key, body string) (Version, error) {
	v, refused, err := c.put(ctx, key, body, nil, Cond{IfAbsent: true})
	switch {
	case err != nil:
		return "", err
	case refused || v == "":
		return "", fmt.Errorf("creating the case's object: refused %v, version %q", refused, v)
	}
	return v, nil
}

// write writes body to key if it matches v, which must succeed.
func (c *checker) write(ctx context.Context, key, body string, v Version) (Version, error) {
	next, refused, err := c.put(ctx, key, body, nil, Cond{IfMatch: v})
	switch {
	case err != nil:
		return "", err
	case refused:
		return "", fmt.Errorf("a write if matching the current version %q was refused", v)
	}
	return next, nil
}

// want checks that key holds body (present false: that it is absent).
func (c *checker) want(ctx context.Context, key, body string, present bool) error {
	got, _, found, err := c.get(ctx, key)
	switch {
	case err != nil:
		return err
	case found != present:
		return fmt.Errorf("the object is %s, want %s", presence(found), presence(present))
	case present && got != body:
		return fmt.Errorf("the object holds %q, want %q", got, body)
	}
	return nil
}

func presence(found bool) string {
	if found {
		return "present"
	}
	return "absent"
}

func (c *checker) metadata(ctx context.Context, key string) error {
	c.note(key)
	if _, err := c.store.Put(ctx, key, []byte("v"), map[string]string{FenceMetadata: "42"}, Cond{}); err != nil {
		return err
	}
	v, meta, err := c.store.Head(ctx, key)
	if err != nil {
		return err
	}
	if got, _ := lookup(meta, FenceMetadata); got != "42" {
		return fmt.Errorf("the object reads back with %s=%q, want 42", FenceMetadata, got)
	}
	if v == "" {
		return errors.New("the object reads back without a version")
	}
	return nil
}

func (c *checker) createExists(ctx context.Context, key string) error {
	if _, err := c.create(ctx, key, "first"); err != nil {
		return err
	}
	_, refused, err := c.put(ctx, key, "second", nil, Cond{IfAbsent: true})
	if err != nil {
		return err
	}
	if !refused {
		return errors.New("it succeeded")
	}
	return c.want(ctx, key, "first", true)
}

// race sends CheckRacers writes at once and returns the bodies of those
// that succeeded.
func (c *checker) race(ctx context.Context, key string, cond Cond) (won []string, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range CheckRacers {
		wg.Go(func() {
			body := fmt.Sprintf("racer %d", i)
			_, refused, perr := c.put(ctx, key, body, nil, cond)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case perr != nil:
				err = perr
			case !refused:
				won = append(won, body)
			}
		})
	}
	wg.Wait()
	return won, err
}

func (c *checker) createRace(ctx context.Context, key string) error {
	won, err := c.race(ctx, key, Cond{IfAbsent: true})
	if err != nil {
		return err
	}
	if len(won) != 1 {
		return fmt.Errorf("%d of %d succeeded, want exactly 1", len(won), CheckRacers)
	}
	return c.want(ctx, key, won[0], true)
}

func (c *checker) matchMissing(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key+"-other", "v")
	if err != nil {
		return err
	}
	_, refused, err := c.put(ctx, key, "v", nil, Cond{IfMatch: stale})
	if err != nil {
		return err
	}
	if !refused {
		return errors.New("it succeeded: the object was created")
	}
	return c.want(ctx, key, "", false)
}

func (c *checker) matchStale(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	if _, err := c.write(ctx, key, "v2", stale); err != nil {
		return err
	}
	_, refused, err := c.put(ctx, key, "v3", nil, Cond{IfMatch: stale})
	if err != nil {
		return err
	}
	if !refused {
		return errors.New("it succeeded")
	}
	return c.want(ctx, key, "v2", true)
}

func (c *checker) matchRace(ctx context.Context, key string) error {
	v, err := c.create(ctx, key, "v0")
	if err != nil {
		return err
	}
	won, err := c.race(ctx, key, Cond{IfMatch: v})
	if err != nil {
		return err
	}
	if len(won) != 1 {
		return fmt.Errorf("%d of %d succeeded, want exactly 1", len(won), CheckRacers)
	}
	return c.want(ctx, key, won[0], true)
}

func (c *checker) versionForms(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key, "v0")
	if err != nil {
		return err
	}
	cur, err := c.write(ctx, key, "v1", stale)
	if err != nil {
		return err
	}
	body := "v1"
	for i := range len(c.store.Forms(cur)) {
		// The i-th form of the version the last write made.
		form := c.store.Forms(cur)[i]
		body = fmt.Sprintf("v%d", i+2)
		next, refused, err := c.put(ctx, key, body, nil, Cond{IfMatch: form})
		switch {
		case err != nil:
			return err
		case refused:
			return fmt.Errorf("a write if matching the current version in the form %q was refused", form)
		}
		cur = next
	}
	for _, form := range c.store.Forms(stale) {
		_, refused, err := c.put(ctx, key, "stale", nil, Cond{IfMatch: form})
		if err != nil {
			return err
		}
		if !refused {
			return fmt.Errorf("a write if matching a stale version in the form %q succeeded", form)
		}
	}
	return c.want(ctx, key, body, true)
}

func (c *checker) deleteStale(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	if _, err := c.write(ctx, key, "v2", stale); err != nil {
		return err
	}
	err = c.store.Delete(ctx, key, Cond{IfMatch: stale})
	switch {
	case err == nil:
		return errors.New("it deleted the object")
	case !errors.Is(err, ErrConditionFailed):
		return err
	}
	return c.want(ctx, key, "v2", true)
}

func (c *checker) deleteCurrent(ctx context.Context, key string) error {
	v, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	if err := c.store.Delete(ctx, key, Cond{IfMatch: v}); err != nil {
		return err
	}
	return c.want(ctx, key, "", false)
}
