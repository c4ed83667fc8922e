package main

// Exit codes of the fence command. They are part of its interface: scripts
// and cron jobs branch on them.
const (
	exitOK        = 0   // success
	exitFailure   = 1   // an error: the server unreachable, a bad answer, I/O
	exitUsage     = 2   // a bad command line or environment variable
	exitNotHeld   = 3   // the lock was held by another holder for all of --wait (lock_held)
	exitLeaseLost = 4   // fence lock: the lease was lost while the command ran; it was stopped
	exitFenced    = 5   // a write was rejected: fenced or token_not_issued
	exitRejected  = 6   // another rejection: lease_lost, precondition_failed, not_found, bad_request, ...
	exitViolation = 7   // fence chaos: the checker found violations; fence guard-check: the endpoint failed a case
	exitNoBite    = 8   // fence chaos: no fault did anything the checker could catch
	exitSignal    = 128 // fence lock: 128+N when the command was killed by signal N
)

const exitCodesHelp = `Exit codes:
  0    success (fence lock: the command's own exit code)
  1    error: server unreachable, unexpected answer, I/O
  2    bad command line or environment variable
  3    lock held by another holder for all of --wait
  4    fence lock: the lease was lost while the command ran, and the command was stopped
  5    write rejected: fenced (stale token) or token_not_issued
  6    other rejection: lease_lost, precondition_failed, not_found, bad_request, ...
  7    fence chaos: the checker found violations; fence guard-check: the endpoint failed a case
  8    fence chaos: no fault bit (no pause outlasted a TTL, no operation was cut short)
  128+N  fence lock: the command was killed by signal N
`
