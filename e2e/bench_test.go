package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCycle measures acquire -> fenced PUT -> release cycles over HTTP on
// loopback against the fence binary in its own process, fsync on, each client
// on its own resource and connection. It reports cycles/s; with group commit,
// 16 clients reach several times the rate of one instead of each paying its
// own fsyncs.
func BenchmarkCycle(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			srv := startQuiet(b, b.TempDir())
			rate := parallel(b, clients, func(client *http.Client, c, n int) error {
				return cycles(client, srv.URL, fmt.Sprintf("bench-%d", c), n)
			})
			b.ReportMetric(rate, "cycles/s")
		})
	}
}

// parallel runs b.N operations split over clients goroutines, each with its
// own connection, and returns operations per second.
func parallel(b *testing.B, clients int, run func(client *http.Client, c, n int) error) float64 {
	per := (b.N + clients - 1) / clients
	errC := make(chan error, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			if err := run(client, c, per); err != nil {
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
	return float64(per*clients) / elapsed.Seconds()
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

// BenchmarkBaseline measures the machine's floors in the same run as
// BenchmarkCycle, so that its figures can be read against them: the fence
// binary's cheapest request (GET /healthz: HTTP on loopback and nothing
// else), and a 64-byte append + fdatasync, sequential.
func BenchmarkBaseline(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("healthz/clients=%d", clients), func(b *testing.B) {
			srv := startQuiet(b, b.TempDir())
			rate := parallel(b, clients, func(client *http.Client, c, n int) error {
				for range n {
					resp, err := client.Get(srv.URL + "/healthz")
					if err != nil {
						return err
					}
					if err := decodeClose(resp, nil); err != nil || resp.StatusCode != 200 {
						return fmt.Errorf("healthz: %d %v", resp.StatusCode, err)
					}
				}
				return nil
			})
			b.ReportMetric(rate, "requests/s")
		})
	}
	b.Run("fdatasync", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "sync"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		rec := make([]byte, 64)
		start := time.Now()
		for b.Loop() {
			if _, err := f.Write(rec); err != nil {
				b.Fatal(err)
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "syncs/s")
	})
}
