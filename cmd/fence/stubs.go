package main

import (
	"context"
	"errors"
)

func lockCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func acquireCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func renewCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func releaseCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func statusCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func putCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func getCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func deleteCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func fenceCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func txnCmd(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
func demo(ctx context.Context, args []string, io stdio) error {
	return errors.New("not implemented yet")
}
