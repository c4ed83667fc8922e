package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// CheckRacers is how many writers race in the check's racing cases.
const CheckRacers = 8

// CheckCase is one case of the conformance check, and how it went.
type CheckCase struct {
	Name string        // short, stable: "create-race", "match-stale", ...
	What string        // what the endpoint must do
	Err  error         // nil if the endpoint did it; else what it did instead
	Took time.Duration // how long the case took
}

// CheckReport is what Check found: every case, in order.
type CheckReport struct {
	Cases []CheckCase
	Took  time.Duration // the whole check
}

// Failed returns the cases the endpoint failed.
func (r CheckReport) Failed() []CheckCase {
	var failed []CheckCase
	for _, c := range r.Cases {
		if c.Err != nil {
			failed = append(failed, c)
		}
	}
	return failed
}

// errUnsure marks a case that could not be judged: a request failed
// without an HTTP answer (the endpoint unreachable, a deadline).
type errUnsure struct{ err error }

func (e errUnsure) Error() string { return e.err.Error() }
func (e errUnsure) Unwrap() error { return e.err }

// checkCases are the cases of the check, in the order they run. Each gets
// a fresh scratch key.
var checkCases = []struct {
	name, what string
	run        func(c *checker, ctx context.Context, key string) error
}{
	{"metadata", "user metadata (x-amz-meta-fence) written with an object reads back with it", (*checker).metadata},
	{"create-exists", "PutObject with If-None-Match: * on an existing key is refused (412) and changes nothing", (*checker).createExists},
	{"create-race", fmt.Sprintf("of %d racing PutObject with If-None-Match: * on a new key, exactly one succeeds", CheckRacers), (*checker).createRace},
	{"match-missing", "PutObject with If-Match on a missing key never succeeds, and creates nothing", (*checker).matchMissing},
	{"match-stale", "PutObject with If-Match of a stale ETag is refused (412) and changes nothing", (*checker).matchStale},
	{"match-race", fmt.Sprintf("of %d racing PutObject with If-Match of the current ETag, exactly one succeeds", CheckRacers), (*checker).matchRace},
	{"etag-forms", "If-Match takes the ETag quoted (as the endpoint returns it) and unquoted, and a stale one in neither form", (*checker).etagForms},
	{"delete-stale", "DeleteObject with If-Match of a stale ETag is refused (412) and deletes nothing", (*checker).deleteStale},
	{"delete-current", "DeleteObject with If-Match of the current ETag deletes the object", (*checker).deleteCurrent},
}

// Check runs the conformance check of the endpoint's conditional writes,
// which the guard's fencing stands on, with scratch objects under Prefix +
// ".fence-check/" that it deletes afterwards. It returns the report and,
// if a case failed, an error wrapping ErrEndpoint that names the first;
// if a request got no answer (the endpoint unreachable), that error, and
// the report so far. A Guard runs it before its first write (unless
// TrustEndpoint).
func (g *Guard) Check(ctx context.Context) (CheckReport, error) {
	if g.Bucket == "" {
		return CheckReport{}, fmt.Errorf("s3: check: Guard.Bucket is empty")
	}
	c := &checker{g: g}
	base := g.Prefix + ".fence-check/" + nonce() + "/"
	start := time.Now()
	var rep CheckReport
	defer c.cleanup()
	for _, cc := range checkCases {
		t := time.Now()
		err := cc.run(c, ctx, base+cc.name)
		rep.Cases = append(rep.Cases, CheckCase{Name: cc.name, What: cc.what, Err: err, Took: time.Since(t)})
		if u := (errUnsure{}); errors.As(err, &u) {
			rep.Took = time.Since(start)
			return rep, fmt.Errorf("s3: check of bucket %q: case %s: %w", g.Bucket, cc.name, u.err)
		}
	}
	rep.Took = time.Since(start)
	if failed := rep.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, f := range failed {
			names[i] = f.Name
		}
		return rep, fmt.Errorf("%w: bucket %q failed %d of %d cases (%s); first, %s: %s: %v",
			ErrEndpoint, g.Bucket, len(failed), len(rep.Cases), strings.Join(names, ", "), failed[0].Name, failed[0].What, failed[0].Err)
	}
	return rep, nil
}

// checker runs the cases, and remembers the keys to delete.
type checker struct {
	g    *Guard
	mu   sync.Mutex
	keys []string
}

// put sends a PutObject of body to key with the headers given ("" for
// none); it returns the ETag and the HTTP status (200 on success), or an
// errUnsure if the request got no answer.
func (c *checker) put(ctx context.Context, key, body, ifMatch, ifNoneMatch string, meta map[string]string) (etag string, code int, err error) {
	c.note(key)
	in := &s3.PutObjectInput{Bucket: c.g.bucket(), Key: aws.String(key), Body: bytes.NewReader([]byte(body)), Metadata: meta}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	out, err := c.g.api.PutObject(ctx, in, once) // the endpoint's own answer, not the SDK's retry of it
	if err == nil {
		return aws.ToString(out.ETag), 200, nil
	}
	if s := status(err); s != 0 {
		return "", s, nil
	}
	return "", 0, errUnsure{err}
}

// del sends a DeleteObject of key with If-Match ifMatch; the HTTP status
// (204 on success).
func (c *checker) del(ctx context.Context, key, ifMatch string) (int, error) {
	_, err := c.g.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: c.g.bucket(), Key: aws.String(key), IfMatch: aws.String(ifMatch)}, once)
	if err == nil {
		return 204, nil
	}
	if s := status(err); s != 0 {
		return s, nil
	}
	return 0, errUnsure{err}
}

// get returns key's body and metadata, with found false on 404.
func (c *checker) get(ctx context.Context, key string) (body string, meta map[string]string, found bool, err error) {
	out, err := c.g.api.GetObject(ctx, &s3.GetObjectInput{Bucket: c.g.bucket(), Key: aws.String(key)})
	if err != nil {
		if notFound(err) {
			return "", nil, false, nil
		}
		if status(err) != 0 {
			return "", nil, false, fmt.Errorf("GetObject: %w", err)
		}
		return "", nil, false, errUnsure{err}
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return "", nil, false, errUnsure{err}
	}
	return string(b), out.Metadata, true, nil
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

// cleanup deletes the scratch objects, best effort: unconditionally, with
// a context of its own.
func (c *checker) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range c.keys {
		_, _ = c.g.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: c.g.bucket(), Key: aws.String(k)})
	}
}

// create writes body to a new key and returns its ETag.
func (c *checker) create(ctx context.Context, key, body string) (string, error) {
	etag, code, err := c.put(ctx, key, body, "", "*", nil)
	if err != nil {
		return "", err
	}
	if code != 200 || etag == "" {
		return "", fmt.Errorf("creating the case's object: HTTP %d, ETag %q", code, etag)
	}
	return etag, nil
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
	if _, code, err := c.put(ctx, key, "v", "", "", map[string]string{FenceMetadata: "42"}); err != nil || code != 200 {
		return firstErr(err, fmt.Errorf("PutObject: HTTP %d", code))
	}
	out, err := c.g.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: c.g.bucket(), Key: aws.String(key)})
	if err != nil {
		if status(err) == 0 {
			return errUnsure{err}
		}
		return fmt.Errorf("HeadObject: %w", err)
	}
	if v, _ := lookup(out.Metadata, FenceMetadata); v != "42" {
		return fmt.Errorf("HeadObject returned %s=%q, want 42", FenceMetadata, v)
	}
	if aws.ToString(out.ETag) == "" {
		return errors.New("HeadObject returned no ETag")
	}
	return nil
}

func (c *checker) createExists(ctx context.Context, key string) error {
	if _, err := c.create(ctx, key, "first"); err != nil {
		return err
	}
	_, code, err := c.put(ctx, key, "second", "", "*", nil)
	if err != nil {
		return err
	}
	if code != 412 && code != 409 {
		return fmt.Errorf("HTTP %d, want 412", code)
	}
	return c.want(ctx, key, "first", true)
}

// race sends n PutObjects at once and counts those that succeeded.
func (c *checker) race(ctx context.Context, key, ifMatch, ifNoneMatch string) (won int, bodies []string, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var unsure error
	for i := range CheckRacers {
		wg.Go(func() {
			body := fmt.Sprintf("racer %d", i)
			_, code, err := c.put(ctx, key, body, ifMatch, ifNoneMatch, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				unsure = err
			case code == 200:
				won++
				bodies = append(bodies, body)
			}
		})
	}
	wg.Wait()
	return won, bodies, unsure
}

func (c *checker) createRace(ctx context.Context, key string) error {
	won, bodies, err := c.race(ctx, key, "", "*")
	if err != nil {
		return err
	}
	if won != 1 {
		return fmt.Errorf("%d of %d succeeded, want exactly 1", won, CheckRacers)
	}
	return c.want(ctx, key, bodies[0], true)
}

func (c *checker) matchMissing(ctx context.Context, key string) error {
	_, code, err := c.put(ctx, key, "v", `"0123456789abcdef0123456789abcdef"`, "", nil)
	if err != nil {
		return err
	}
	if code == 200 {
		return errors.New("HTTP 200: the object was created")
	}
	return c.want(ctx, key, "", false)
}

func (c *checker) matchStale(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	if _, code, err := c.put(ctx, key, "v2", stale, "", nil); err != nil || code != 200 {
		return firstErr(err, fmt.Errorf("If-Match of the current ETag: HTTP %d, want 200", code))
	}
	_, code, err := c.put(ctx, key, "v3", stale, "", nil)
	if err != nil {
		return err
	}
	if code != 412 && code != 409 {
		return fmt.Errorf("HTTP %d, want 412", code)
	}
	return c.want(ctx, key, "v2", true)
}

func (c *checker) matchRace(ctx context.Context, key string) error {
	etag, err := c.create(ctx, key, "v0")
	if err != nil {
		return err
	}
	won, bodies, err := c.race(ctx, key, etag, "")
	if err != nil {
		return err
	}
	if won != 1 {
		return fmt.Errorf("%d of %d succeeded, want exactly 1", won, CheckRacers)
	}
	return c.want(ctx, key, bodies[0], true)
}

func (c *checker) etagForms(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	unquoted := func(e string) string { return strings.Trim(e, `"`) }
	quoted := func(e string) string { return `"` + unquoted(e) + `"` }
	cur, code, err := c.put(ctx, key, "v2", quoted(stale), "", nil)
	if err != nil || code != 200 {
		return firstErr(err, fmt.Errorf("If-Match of the current ETag, quoted: HTTP %d, want 200", code))
	}
	if _, code, err = c.put(ctx, key, "v3", unquoted(cur), "", nil); err != nil || code != 200 {
		return firstErr(err, fmt.Errorf("If-Match of the current ETag, unquoted: HTTP %d, want 200", code))
	}
	for _, form := range []struct{ name, etag string }{{"quoted", quoted(stale)}, {"unquoted", unquoted(stale)}} {
		_, code, err := c.put(ctx, key, "stale", form.etag, "", nil)
		if err != nil {
			return err
		}
		if code == 200 {
			return fmt.Errorf("If-Match of a stale ETag, %s: HTTP 200, want 412", form.name)
		}
	}
	return c.want(ctx, key, "v3", true)
}

func (c *checker) deleteStale(ctx context.Context, key string) error {
	stale, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	if _, code, err := c.put(ctx, key, "v2", stale, "", nil); err != nil || code != 200 {
		return firstErr(err, fmt.Errorf("If-Match of the current ETag: HTTP %d, want 200", code))
	}
	code, err := c.del(ctx, key, stale)
	if err != nil {
		return err
	}
	if code != 412 && code != 409 {
		return fmt.Errorf("HTTP %d, want 412", code)
	}
	return c.want(ctx, key, "v2", true)
}

func (c *checker) deleteCurrent(ctx context.Context, key string) error {
	etag, err := c.create(ctx, key, "v1")
	if err != nil {
		return err
	}
	code, err := c.del(ctx, key, etag)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("HTTP %d, want 204", code)
	}
	return c.want(ctx, key, "", false)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
