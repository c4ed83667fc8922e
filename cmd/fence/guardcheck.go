package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fence-lock/fence/guard/object"
	s3guard "github.com/fence-lock/fence/guard/s3"
)

const guardCheckSynopsis = `fence guard-check s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION] [-o json]

Checks that an object store's conditional writes can be trusted to fence,
as the S3 guard (guard/s3) does before its first write: with scratch
objects under PREFIX/.fence-check/, deleted afterwards, it checks that user
metadata is kept; that If-None-Match: * refuses an existing key; that of 8
racing creates, and of 8 racing If-Match writes, exactly one succeeds; that
If-Match never creates a missing key; that a stale ETag is refused, by
PutObject and by DeleteObject; that the current ETag is taken quoted and
unquoted, a stale one in neither form; and that a conditional delete with
the current ETag deletes. Each case is printed with its time.

Without endpoint, the location is AWS S3 itself; with one, an S3-compatible
server, addressed path-style. Credentials come from AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (anonymous without them), the
region from region=, else AWS_REGION, else us-east-1. It exits 0 when every
case passed, 7 when the endpoint failed one (it is named; the guard would
refuse to write through it), 1 when the endpoint could not be reached.`

const guardCheckExamples = `  fence guard-check 's3://my-bucket/app/'
  fence guard-check 's3://test?endpoint=http://127.0.0.1:8333' -o json
`

// guardCheckCase is one case in -o json.
type guardCheckCase struct {
	Name   string  `json:"name"`
	What   string  `json:"what"`
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty"`
	TookMS float64 `json:"took_ms"`
}

// guardCheckCmd runs the conformance check of an S3 endpoint.
func guardCheckCmd(ctx context.Context, args []string, std stdio) error {
	var output string
	fs := newFlagSet("guard-check", guardCheckSynopsis, guardCheckExamples, std.out)
	addOutputFlag(fs, &output)
	positional, _, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("guard-check", positional, "LOCATION"); err != nil {
		return err
	}
	if output != "text" && output != "json" {
		return &usageError{fmt.Errorf("guard-check: --output %q: want text or json", output)}
	}
	loc, err := s3guard.ParseLocation(positional[0])
	if err != nil {
		return &usageError{fmt.Errorf("guard-check: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rep, err := loc.Guard().Check(ctx)
	if output == "json" {
		cases := make([]guardCheckCase, len(rep.Cases))
		for i, c := range rep.Cases {
			cases[i] = guardCheckCase{Name: c.Name, What: c.What, OK: c.Err == nil, TookMS: float64(c.Took.Microseconds()) / 1000}
			if c.Err != nil {
				cases[i].Error = c.Err.Error()
			}
		}
		if perr := printJSON(std.out, map[string]any{"location": loc.String(), "ok": err == nil, "cases": cases,
			"took_ms": float64(rep.Took.Microseconds()) / 1000}); perr != nil {
			return perr
		}
	} else {
		for _, c := range rep.Cases {
			verdict := "ok  "
			if c.Err != nil {
				verdict = "FAIL"
			}
			fmt.Fprintf(std.out, "%s  %-15s %8s  %s\n", verdict, c.Name, c.Took.Round(time.Millisecond), c.What)
			if c.Err != nil {
				fmt.Fprintf(std.out, "      %s\n", c.Err)
			}
		}
		if err == nil {
			fmt.Fprintf(std.out, "%s: every case passed in %s: the S3 guard can fence through it\n", loc, rep.Took.Round(time.Millisecond))
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, object.ErrEndpoint):
		return &exitError{code: exitViolation, err: fmt.Errorf("guard-check: %s: %w", loc, err)}
	}
	return fmt.Errorf("guard-check: %s: %w", loc, err)
}
