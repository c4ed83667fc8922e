package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkCycle measures acquire -> fenced PUT -> release cycles over HTTP on
// loopback, fsync on, each client on its own resource and connection. It
// reports cycles/s; with group commit, 16 clients reach several times the rate
// of one instead of sharing one fsync per request.
func BenchmarkCycle(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			url, _ := newService(b)
			var wg sync.WaitGroup
			errC := make(chan error, clients)
			per := (b.N + clients - 1) / clients
			b.ResetTimer()
			start := time.Now()
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
					defer client.CloseIdleConnections()
					if err := cycles(client, url, fmt.Sprintf("bench-%d", c), per); err != nil {
						errC <- err
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errC)
			if err := <-errC; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per*clients)/elapsed.Seconds(), "cycles/s")
		})
	}
}

// cycles runs n acquire -> fenced PUT -> release cycles on resource.
func cycles(client *http.Client, url, resource string, n int) error {
	for i := range n {
		var l lease
		code, err := post(client, url+"/v1/locks/"+resource+"/acquire", `{"holder":"bench","ttl_ms":10000}`, nil, &l)
		if err != nil || code != 200 {
			return fmt.Errorf("acquire: %d %v", code, err)
		}
		req, _ := http.NewRequest(http.MethodPut, url+"/v1/kv/"+resource+"/k", strings.NewReader(fmt.Sprint("value-", i)))
		req.Header.Set("Fencing-Token", fmt.Sprint(l.Token))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		if err := decodeClose(resp, nil); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("put: %d %v", resp.StatusCode, err)
		}
		code, err = post(client, url+"/v1/locks/"+resource+"/release", fmt.Sprintf(`{"token":%d}`, l.Token), nil, nil)
		if err != nil || code != 200 {
			return fmt.Errorf("release: %d %v", code, err)
		}
	}
	return nil
}
