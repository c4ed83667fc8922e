package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/support/clientcert"
	"github.com/fence-lock/fence/wire"
)

// This file turns the errors of the client and the server into messages for
// the person at the terminal: one sentence that names the problem once, in
// the terms of the command line, without the layers it passed through
// ("client: GET /v1/...: fence: journal: put ...: fence: ...").

// userError is an error with a message for people; Unwrap gives the error
// it describes, for errors.Is and errors.As.
type userError struct {
	msg string
	err error
}

// Error returns the message for people.
func (e *userError) Error() string { return e.msg }

// Unwrap returns the error the message describes.
func (e *userError) Unwrap() error { return e.err }

var (
	// layerPrefix is a segment that names a layer, not a problem.
	layerPrefix = regexp.MustCompile(`(^|: )(?:fence|client|journal|bolt|memory|httpapi|wire): `)
	// requestPrefix is the request a client error happened in.
	requestPrefix = regexp.MustCompile(`(^|: )(?:GET|POST|PUT|DELETE|PATCH|HEAD) /v1/\S*: `)
	// urlPrefix is the prefix of a *url.Error.
	urlPrefix = regexp.MustCompile(`(^|: )(?:Get|Post|Put|Delete|Patch|Head) "[^"]*": `)
	// word is a segment that may be repeated by wrapping: "txn: ... txn:".
	word = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// tidy removes from msg the prefixes of the layers an error passed
// through, and a one-word context said twice.
func tidy(msg string) string {
	for _, re := range []*regexp.Regexp{layerPrefix, requestPrefix, urlPrefix} {
		for {
			next := re.ReplaceAllString(msg, "$1")
			if next == msg {
				break
			}
			msg = next
		}
	}
	parts := strings.Split(msg, ": ")
	seen := map[string]bool{}
	kept := parts[:0]
	for _, p := range parts {
		if word.MatchString(p) {
			if seen[p] {
				continue
			}
			seen[p] = true
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ": ")
}

// apiError maps an error of a call that reads to the documented exit
// codes, with a message for people.
func apiError(err error) error { return callError(err, false) }

// apiWriteError is apiError for a call that changes something: if the call
// may have taken effect although it failed, the message says so.
func apiWriteError(err error) error { return callError(err, true) }

func callError(err error, write bool) error {
	if err == nil {
		return nil
	}
	code := exitFailure
	var p *wire.Problem
	switch {
	case errors.Is(err, fence.ErrLockHeld):
		code = exitNotHeld
	case errors.Is(err, fence.ErrFenced), errors.Is(err, fence.ErrTokenNotIssued):
		code = exitFenced
	case errors.As(err, &p) && p.Status >= 400 && p.Status < 500:
		code = exitRejected
	}
	msg := describe(err)
	if write && client.IsAmbiguous(err) {
		msg += "; the change may or may not have been applied"
	}
	return &exitError{code: code, err: &userError{msg, err}}
}

// commandError is err, an error of command name that may come from the
// client or the server, with a message for people.
func commandError(name string, err error) error {
	return &userError{name + ": " + describe(err), err}
}

// describe returns the message of err, an error of the client or the
// server, for people.
func describe(err error) string {
	var (
		fenced   *fence.FencedError
		notIssue *fence.TokenNotIssuedError
		held     *fence.LockHeldError
		lost     *fence.LeaseLostError
		p        *wire.Problem
		ue       *url.Error
	)
	switch {
	case errors.As(err, &fenced):
		return fmt.Sprintf("token %d is stale: a newer holder fenced %q with token %d; nothing was written", fenced.Presented, fenced.Resource, fenced.LastFence)
	case errors.As(err, &notIssue):
		return fmt.Sprintf("token %d was never issued for %q (the last token issued is %d)", notIssue.Presented, notIssue.Resource, notIssue.LastToken)
	case errors.As(err, &held):
		return fmt.Sprintf("lock held by another holder: %q (its lease expires in %s unless renewed)", held.Resource, roundDuration(held.RetryAfter))
	case errors.As(err, &lost):
		now := "nobody holds it now"
		if lost.Current != 0 {
			now = fmt.Sprintf("token %d does now", lost.Current)
		}
		return fmt.Sprintf("lease lost: token %d no longer holds %q (%s)", lost.Presented, lost.Resource, now)
	case errors.As(err, &p):
		return problemMessage(p)
	case errors.As(err, &ue):
		return transportMessage(ue)
	}
	return tidy(err.Error())
}

// roundDuration rounds d for a message: 59.834s is 59.8s.
func roundDuration(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// problemMessage describes an answer of the server that is not one of the
// typed fence errors.
func problemMessage(p *wire.Problem) string {
	if p.Err == nil {
		detail := strings.TrimSpace(p.Detail)
		if p.Code == "" {
			return fmt.Sprintf("unexpected answer from the server: HTTP %d: %s", p.Status, detail)
		}
		return fmt.Sprintf("the server failed: %s: %s", strings.ReplaceAll(p.Code, "_", " "), tidy(detail))
	}
	sentinel := p.Err.Error()
	msg := strings.TrimPrefix(sentinel, "fence: ")
	switch i := strings.LastIndex(p.Detail, sentinel); {
	case i >= 0:
		msg += p.Detail[i+len(sentinel):]
	case p.Detail != "" && !strings.HasPrefix(tidy(p.Detail), msg):
		msg += ": " + tidy(p.Detail)
	case p.Detail != "":
		msg = tidy(p.Detail)
	}
	switch {
	case errors.Is(p.Err, fence.ErrUnauthorized):
		msg += "; give the server's token in FENCE_AUTH_TOKEN (or --auth-token)"
	case errors.Is(p.Err, fence.ErrRateLimited) && p.RetryAfter > 0:
		msg += fmt.Sprintf("; retry in %s", roundDuration(p.RetryAfter))
	}
	return msg
}

// transportMessage describes a request that got no answer from the server.
func transportMessage(ue *url.Error) string {
	server := ue.URL
	if u, err := url.Parse(ue.URL); err == nil {
		server = u.Scheme + "://" + u.Host
	}
	var (
		op    *net.OpError
		dns   *net.DNSError
		cert  *tls.CertificateVerificationError
		rec   tls.RecordHeaderError
		errno syscall.Errno
	)
	inner := ue.Err
	switch {
	case errors.Is(inner, clientcert.ErrMissing):
		return fmt.Sprintf("the server at %s wants a client certificate: give --client-cert and --client-key", server)
	case strings.Contains(inner.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("the server at %s answered in plain HTTP: write http:// in --addr", server)
	case errors.As(inner, &rec):
		return fmt.Sprintf("the server at %s does not speak TLS: write http:// in --addr", server)
	case errors.As(inner, &cert):
		return fmt.Sprintf("cannot verify the certificate of the server at %s: %v (--cacert names the CA that signed it)", server, cert.Err)
	case errors.As(inner, &op) && op.Op == "remote error":
		return fmt.Sprintf("the server at %s refused the TLS handshake: %v (does it want a client certificate? --client-cert and --client-key)", server, op.Err)
	case errors.Is(inner, context.Canceled):
		return fmt.Sprintf("interrupted while waiting for the fence server at %s", server)
	case errors.Is(inner, context.DeadlineExceeded), errors.Is(inner, os.ErrDeadlineExceeded):
		return fmt.Sprintf("no answer from the fence server at %s in time", server)
	case errors.As(inner, &dns):
		return fmt.Sprintf("cannot reach the fence server at %s: no such host %q", server, dns.Name)
	case errors.As(inner, &op) && op.Op == "dial":
		cause := op.Err.Error()
		if errors.As(inner, &errno) {
			cause = errno.Error()
		}
		return fmt.Sprintf("cannot reach the fence server at %s: %s", server, cause)
	case errors.Is(inner, io.EOF), errors.Is(inner, io.ErrUnexpectedEOF):
		return fmt.Sprintf("lost the connection to the fence server at %s: it closed the connection", server)
	case errors.As(inner, &errno):
		return fmt.Sprintf("lost the connection to the fence server at %s: %s", server, errno.Error())
	}
	return fmt.Sprintf("lost the connection to the fence server at %s: %s", server, tidy(inner.Error()))
}
