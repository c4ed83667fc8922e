package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/zookeeper"
)

// A holder with token 41 writes, a newer holder with token 42 writes, and the
// first holder's late write is rejected: the newer value stands.
func ExampleGuard_Apply() {
	ctx := context.Background()
	conn, _, err := zk.Connect(servers(), 10*time.Second, zk.WithLogger(quiet{})) // servers: your ensemble
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	defer removeTree(conn, "/example") // so that the example can run again
	g := zookeeper.NewGuard(conn)
	g.Root = "/example/fences" // created with its parents on first use

	_, err = g.Apply(ctx, "orders", 41, zookeeper.Create("/example/total", []byte("A1")))
	fmt.Println("A, token 41:", err)
	_, err = g.Apply(ctx, "orders", 42, zookeeper.Set("/example/total", []byte("B")))
	fmt.Println("B, token 42:", err)
	_, err = g.Apply(ctx, "orders", 41, zookeeper.Set("/example/total", []byte("A2")))
	var fenced *fence.FencedError
	if errors.As(err, &fenced) {
		fmt.Printf("A, token 41: fenced by %d\n", fenced.LastFence)
	}
	total, _, _ := conn.Get("/example/total")
	fmt.Printf("total = %s\n", total)
	// Output:
	// A, token 41: <nil>
	// B, token 42: <nil>
	// A, token 41: fenced by 42
	// total = B
}
