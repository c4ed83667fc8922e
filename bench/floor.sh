#!/usr/bin/env bash
# fence's one-client cycle next to its floor on this machine, alternating in
# one run: bench/floor (Go's net/http and one pwrite + fdatasync per
# request, nothing else), the same without the fdatasync, and fence serve
# on its embedded store, each measured by the peer benchmark's seq case
# (one client: acquire -> fenced write -> release). All on 127.0.0.1, data
# in a new temporary directory. Prints one line per measurement; the peer
# benchmark's whole output goes to $LOG.
#
#   go build -o /tmp/fence ./cmd/fence
#   PEERS=/path/to/peers FENCE=/tmp/fence bench/floor.sh
#
# Knobs: ROUNDS=5 DUR=5s LOG=floor-<time>.log
set -uo pipefail
ROUNDS=${ROUNDS:-5}; DUR=${DUR:-5s}
LOG=${LOG:-floor-$(date +%Y%m%d-%H%M%S).log}
FENCE=${FENCE:?FENCE: the fence binary}
PEERS=${PEERS:?PEERS: the peer benchmark binary}
T=$(mktemp -d -t fence-floor-bench.XXXXXX); PID=""
trap 'kill "$PID" 2>/dev/null; rm -rf "$T"' EXIT
(cd "$(dirname "$0")/.." && go build -o "$T/floor" ./bench/floor) || exit 1
for round in $(seq "$ROUNDS"); do
  for sys in floor floor-nosync fence; do
    rm -rf "$T/data" "$T/floor.seg"
    case $sys in
      floor) "$T/floor" --listen 127.0.0.1:17703 --file "$T/floor.seg" 2>>"$LOG" & ;;
      floor-nosync) "$T/floor" --listen 127.0.0.1:17703 --file "$T/floor.seg" --nosync 2>>"$LOG" & ;;
      fence) "$FENCE" serve --listen 127.0.0.1:17703 --data "$T/data" 2>"$T/fence.log" & ;;
    esac
    PID=$!
    if ! "$PEERS" -system fence -variant "$sys" -round "$round" -addr 127.0.0.1:17703 -cases seq \
      -dur "$DUR" -server-pid "$PID" >>"$LOG" 2>&1; then
      echo "$sys, round $round: the peer benchmark failed; see $LOG" >&2
      [ "$sys" = fence ] && tail -5 "$T/fence.log" >&2
      exit 1
    fi
    grep "clients=" "$LOG" | tail -1 | sed -E 's/ +\| 1\.acquire.*//'
    kill "$PID"; wait "$PID" 2>/dev/null
  done
done
