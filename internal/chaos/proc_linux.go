package chaos

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// The children of a cluster run (fence servers and clients) are started by
// one goroutine locked to its OS thread for the life of the process, with a
// parent-death signal: Linux sends it when the thread that forked the child
// exits, and a locked thread that never returns lives as long as the process.
// So the children die with the harness however it dies (kill -9 included),
// as internal/testserver's servers do.
var (
	spawnOnce sync.Once
	spawnC    chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	errC chan error
}

func spawner(reqC <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: see spawnC
	for r := range reqC {
		r.errC <- r.cmd.Start()
	}
}

// spawn starts cmd killed by SIGKILL when this process dies, in a process
// group of its own, so that a terminal's ^C reaches only the harness, which
// then stops its children in order.
func spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	spawnOnce.Do(func() {
		spawnC = make(chan spawnReq)
		go spawner(spawnC)
	})
	r := spawnReq{cmd: cmd, errC: make(chan error, 1)}
	spawnC <- r
	return <-r.errC
}
