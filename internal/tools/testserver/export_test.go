package testserver

// ProcID exports procID to the tests: a process named by pid and start time.
type ProcID = procID

// Descendants exports descendants.
func Descendants(pid int) ([]ProcID, error) { return descendants(pid) }

// NewProcID returns the ProcID of the running process pid.
func NewProcID(pid int) (ProcID, error) {
	_, _, start, err := procStat(pid)
	return procID{pid: pid, start: start}, err
}

// Alive reports whether p still runs (a zombie does not).
func (p procID) Alive() bool { return p.state() != 0 }

// PID returns p's pid.
func (p procID) PID() int { return p.pid }

// State returns p's state letter, or 0 when it is gone.
func (p procID) State() byte { return p.state() }
