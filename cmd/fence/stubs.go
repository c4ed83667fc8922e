package main

import (
	"context"
	"errors"
)

func demo(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
