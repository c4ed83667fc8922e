package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
)

// revokeJSON is what `fence revoke -o json` prints: the server's answer.
type revokeJSON struct {
	Resource     string      `json:"resource"`
	RevokedToken fence.Token `json:"revoked_token"`
	LastFence    fence.Token `json:"last_fence"`
}

// revokeAskedJSON is what `fence revoke --grace D -o json` prints when the
// holder was asked to let go: the server's 202 answer.
type revokeAskedJSON struct {
	Resource string      `json:"resource"`
	Holder   string      `json:"holder,omitempty"`
	Token    fence.Token `json:"token"`
	RevokeAt string      `json:"revoke_at"`
}

// revokeCmd takes a resource away from its holder (an admin action): the
// server ends the lease, if any, and raises the resource's fence to a new
// token, so that the old holder's writes are rejected at once. With
// --grace it asks the holder to let go first, and the server revokes at
// the deadline if it has not. With auth on it needs the admin permission.
func revokeCmd(ctx context.Context, args []string, std stdio) error {
	var grace time.Duration
	c := newAPICommand(std, "revoke", "fence revoke RESOURCE [--grace D]",
		"  fence revoke orders\n  fence revoke orders -o json\n  # ask the holder to let go within 30s, then revoke\n  fence revoke orders --grace 30s\n",
		func(fs *flag.FlagSet) {
			fs.DurationVar(&grace, "grace", 0, "ask the holder to let go within `D` (a fence lock holding it gets SIGTERM), and revoke then if it has not (0: revoke now)")
		})
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	if grace != 0 && (grace < fence.MinTTL || grace > fence.MaxTTL) {
		return &usageError{fmt.Errorf("revoke: --grace %s: want %s to %s, or 0 to revoke now", grace, fence.MinTTL, fence.MaxTTL)}
	}
	var res fence.RevokeResult
	var err error
	if grace == 0 {
		res, err = c.api.Revoke(ctx, c.args[0])
	} else {
		var asked fence.Lease
		asked, res, err = c.api.RequestRevoke(ctx, c.args[0], grace)
		if err == nil && asked.Token != 0 {
			at := asked.RevokeAt.UTC().Format(time.RFC3339Nano)
			who := "holder " + asked.Holder
			if asked.Shared {
				who = "the shared holders"
			}
			return c.print(revokeAskedJSON{c.args[0], asked.Holder, asked.Token, at},
				fmt.Sprintf("%s: asked %s (token %d) to let go; revoked at %s unless released", c.args[0], who, asked.Token, at))
		}
	}
	if err != nil {
		return apiError(err)
	}
	text := fmt.Sprintf("%s: revoked token %d, last fence %d", res.Resource, res.Revoked, res.LastFence)
	if res.Revoked == 0 {
		text = fmt.Sprintf("%s: was not held; last fence raised to %d", res.Resource, res.LastFence)
	}
	return c.print(revokeJSON{res.Resource, res.Revoked, res.LastFence}, text)
}
