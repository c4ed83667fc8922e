package redis_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/fence-lock/fence"
	fenceredis "github.com/fence-lock/fence/guard/redis"
	goredis "github.com/redis/go-redis/v9"
)

// A holder of the lock on "orders", with fencing token token, writes two keys
// and bumps a counter, atomically with the fence check. A zombie holder of an
// older token gets ErrFenced and changes nothing.
func ExampleGuard_Apply() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"}) // or goredis.NewClusterClient
	g := fenceredis.NewGuard(rdb)
	ctx := context.Background()
	var token fence.Token = 42 // from the lock service's grant

	err := g.Apply(ctx, "orders", token,
		fenceredis.Set(fenceredis.Key("orders", "status"), []byte("shipped"), 24*time.Hour),
		fenceredis.CompareAndSet(fenceredis.Key("orders", "owner"), []byte("worker-a"), []byte("worker-a")),
		fenceredis.IncrBy(fenceredis.Key("orders", "shipped"), 1),
	)
	switch {
	case errors.Is(err, fence.ErrFenced):
		log.Print("a newer holder has the lock: stop writing")
	case errors.Is(err, fence.ErrPreconditionFailed):
		log.Print("the owner changed: nothing was written")
	case err != nil:
		log.Printf("outcome unknown: %v", err) // a timeout: the write may have landed
	}
}
