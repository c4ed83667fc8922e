package main

import (
	"context"
	"fmt"

	"github.com/fence-lock/fence"
)

// revokeJSON is what `fence revoke -o json` prints: the server's answer.
type revokeJSON struct {
	Resource     string      `json:"resource"`
	RevokedToken fence.Token `json:"revoked_token"`
	LastFence    fence.Token `json:"last_fence"`
}

// revokeCmd takes a resource away from its holder (an admin action): the
// server ends the lease, if any, and raises the resource's fence to a new
// token, so that the old holder's writes are rejected at once. With auth on
// it needs the admin permission.
func revokeCmd(ctx context.Context, args []string, std stdio) error {
	c := newAPICommand(std, "revoke", "fence revoke RESOURCE",
		"  fence revoke orders\n  fence revoke orders -o json\n", nil)
	if err := c.parse(args, "RESOURCE"); err != nil {
		return err
	}
	res, err := c.api.Revoke(ctx, c.args[0])
	if err != nil {
		return apiError(err)
	}
	text := fmt.Sprintf("%s: revoked token %d, last fence %d", res.Resource, res.Revoked, res.LastFence)
	if res.Revoked == 0 {
		text = fmt.Sprintf("%s: was not held; last fence raised to %d", res.Resource, res.LastFence)
	}
	return c.print(revokeJSON{res.Resource, res.Revoked, res.LastFence}, text)
}
