package chaos

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
	"github.com/fence-lock/fence/internal/tools/testserver"
)

// noLocker serves no lock calls: in unsafe mode the locks come from fence.
type noLocker struct{ fence.Locker }

func (r *run) startClients() error {
	r.pauseC = make(chan pausePoint, r.cfg.Clients)
	r.writeC = make(chan writePoint, r.cfg.Clients)
	timeout := clientTimeout(r.cfg)
	for i := range r.cfg.Clients {
		lockURL, storeURL := r.lockURL, r.storeProx
		if r.cl != nil {
			// Each client talks to one server, through that server's
			// proxy, and not to all of them with failover (which the
			// client could do): a client pinned to the leader keeps
			// sending it requests while leader-pause holds it frozen, so
			// that it wakes with stale requests queued, which is what
			// that fault tests. A client pinned to a standby is served
			// by forwarding.
			lockURL = "http://" + r.proxies[pin(i, len(r.proxies))].Addr()
			storeURL = lockURL
		}
		args := []string{"chaos-worker",
			"--client", strconv.Itoa(i), "--lock-addr", lockURL, "--store-addr", storeURL,
			"--resources", strconv.Itoa(r.cfg.Resources), "--keys", strconv.Itoa(r.cfg.Keys),
			"--ttl", r.cfg.TTL.String(), "--timeout", timeout.String(), "--txn-percent", strconv.Itoa(r.cfg.TxnPercent),
			"--workload", cmp.Or(r.cfg.Workload, WorkloadLock),
			"--think", r.cfg.Think.String(), "--key-prefix", r.keyPrefix,
			"--seed", strconv.FormatUint(r.cfg.Seed, 10), "--start", strconv.FormatInt(r.start.UnixNano(), 10)}
		args = append(args, r.workerTargetArgs()...)
		cmd := exec.Command(r.cfg.Binary, args...)
		cmd.Env = r.workerEnv()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		cmd.Stderr = io.Discard
		start := cmd.Start
		if r.cl != nil {
			start = func() error { return testserver.StartChild(cmd) } // dies with the harness, like the servers
		}
		if err := start(); err != nil {
			return fmt.Errorf("chaos: starting client %d: %w", i, err)
		}
		r.clients = append(r.clients, cmd)
		r.clientWG.Add(1)
		go func() {
			defer r.clientWG.Done()
			r.readClient(stdout)
		}()
	}
	return nil
}

// workerTargetArgs returns the flags of chaos-worker that say how to reach
// an https server, and the guard.
func (r *run) workerTargetArgs() []string {
	var args []string
	if r.scheme == "https" {
		u, _ := url.Parse(r.cfg.Addr)
		args = append(args, "--server-name", u.Hostname())
	}
	for _, f := range []struct{ flag, file string }{
		{"--cacert", r.cfg.CACert}, {"--client-cert", r.cfg.ClientCert}, {"--client-key", r.cfg.ClientKey},
	} {
		if f.file != "" {
			args = append(args, f.flag, f.file)
		}
	}
	if r.guard != nil {
		args = append(args, "--guard-addr", r.guard.addr(), "--guard-prefix", r.guard.prefix())
		if r.cfg.Unsafe {
			args = append(args, "--unsafe")
		}
	}
	return args
}

// workerEnv returns the clients' environment: the harness's, and the
// secrets that flags would show in ps.
func (r *run) workerEnv() []string {
	env := append(os.Environ(), AuthTokenEnv+"="+r.cfg.AuthToken)
	if r.guard != nil {
		env = append(env, GuardEnv+"="+r.cfg.Guard)
	}
	return env
}

// readClient collects a client's operations and pause points.
func (r *run) readClient(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if strings.HasPrefix(string(line), `{"pause_point"`) {
			var p pausePoint
			if json.Unmarshal(line, &p) == nil {
				select {
				case r.pauseC <- p:
				default:
				}
			}
			continue
		}
		if strings.HasPrefix(string(line), `{"write_point"`) {
			var p writePoint
			if json.Unmarshal(line, &p) == nil {
				select {
				case r.writeC <- p:
				default:
				}
			}
			continue
		}
		var op history.Op
		if err := json.Unmarshal(line, &op); err != nil {
			continue // a client killed mid-line
		}
		r.record(op)
	}
}

// stopClients heals every fault and stops the clients (SIGTERM: each ends
// after its operation in flight; SIGKILL after a grace).
func (r *run) stopClients() {
	r.eachProxy(func(p *proxy.Proxy) { p.Heal() })
	for _, c := range r.clients {
		c.Process.Signal(syscall.SIGCONT)
		c.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() {
		for _, c := range r.clients {
			c.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2*r.cfg.TTL + 5*time.Second):
		for _, c := range r.clients {
			c.Process.Kill()
		}
		<-done
	}
	r.clientWG.Wait()
}

// finalReads reads every key directly from the storage, as client -1.
func (r *run) finalReads() { r.readEveryKey() }
