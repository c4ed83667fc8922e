package etcd_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A holder with token 41 writes, a newer holder with token 42 writes, and the
// first holder's late write is rejected: the newer value stands.
func ExampleGuard_Apply() {
	ctx := context.Background()
	c, err := clientv3.New(clientConfig(clientv3.Config{})) // Endpoints: your cluster
	if err != nil {
		panic(err)
	}
	defer c.Close()
	g := etcd.NewGuard(c)
	g.Prefix = "/example/fences/"

	_, err = g.Apply(ctx, "orders", 41, clientv3.OpPut("/example/orders/total", "A1"))
	fmt.Println("A, token 41:", err)
	_, err = g.Apply(ctx, "orders", 42, clientv3.OpPut("/example/orders/total", "B"))
	fmt.Println("B, token 42:", err)
	_, err = g.Apply(ctx, "orders", 41, clientv3.OpPut("/example/orders/total", "A2"))
	var fenced *fence.FencedError
	if errors.As(err, &fenced) {
		fmt.Printf("A, token 41: fenced by %d\n", fenced.LastFence)
	}
	resp, _ := c.Get(ctx, "/example/orders/total")
	fmt.Printf("total = %s\n", resp.Kvs[0].Value)
	// Output:
	// A, token 41: <nil>
	// B, token 42: <nil>
	// A, token 41: fenced by 42
	// total = B
}
