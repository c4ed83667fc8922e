#!/usr/bin/env bash
# fence on several machines, measured side by side with etcd's own locks:
# for every round and system, fresh servers on loopback ports (127.0.0.1
# only), data in new temporary directories, then the peer benchmark's
# acquire -> fenced write -> release cases against them:
#   - etcd's own concurrency.Mutex + Txn cycle on a 3-member etcd cluster;
#   - fence, 3 servers on a 3-member etcd cluster (the same etcd settings);
#   - fence, 2 servers on PostgreSQL with a synchronous standby.
# Needs: Debian's etcd-server and postgresql, curl, psql, root (PostgreSQL
# runs as the postgres user), and the peer benchmark's program (PEERS).
#
#   go build -o /tmp/fence ./cmd/fence
#   PEERS=/path/to/peers FENCE=/tmp/fence bench/cluster.sh
#
# Knobs: ROUNDS=3 DUR=10s CASES=seq,par,contend OUT=cluster-<time>.jsonl
# SYSTEMS="etcd fence-etcd fence-pg" (which of the three to measure)
# BASE=/path/to/an/older/fence measures it too, in every round, beside FENCE
# (a before/after of a change, alternating in one run).
set -uo pipefail
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-10s}; CASES=${CASES:-seq,par,contend}
OUT=${OUT:-cluster-$(date +%Y%m%d-%H%M%S).jsonl}
FENCE=${FENCE:?FENCE: the fence binary}
PEERS=${PEERS:?PEERS: the peer benchmark binary}
BASE=${BASE:-}; SYSTEMS=${SYSTEMS:-etcd fence-etcd fence-pg}
has() { case " $SYSTEMS " in *" $1 "*) return 0;; esac; return 1; }
PGB=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pids=(); T=""
stop_all() {
  for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done; pids=()
  if [ -n "$T" ]; then for d in $T/pg1 $T/pg2; do [ -d $d ] && runuser -u postgres -- $PGB/pg_ctl -D $d -m immediate stop >/dev/null 2>&1; done; rm -rf $T; fi
  sleep 1
}
trap stop_all EXIT
start_etcd() {
  T=$(mktemp -d -t fence-cluster-bench.XXXXXX); chmod 755 $T
  local tok=cb$RANDOM cl="e1=http://127.0.0.1:32381,e2=http://127.0.0.1:32382,e3=http://127.0.0.1:32383"
  for i in 1 2 3; do
    etcd --name e$i --data-dir $T/e$i --listen-client-urls http://127.0.0.1:3237$i --advertise-client-urls http://127.0.0.1:3237$i \
      --listen-peer-urls http://127.0.0.1:3238$i --initial-advertise-peer-urls http://127.0.0.1:3238$i --initial-cluster $cl \
      --initial-cluster-state new --initial-cluster-token $tok --max-request-bytes 10485760 --logger zap --log-outputs stderr >$T/e$i.log 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 100); do curl -s 127.0.0.1:32371/health | grep -q '"health":"true"' && break; sleep 0.2; done
}
leader_of() { for a in "$@"; do curl -s $a/v1/cluster | grep -q '^{"role":"leader"' && { echo $a; return; }; done; }
wait_leader() { L=""; for _ in $(seq 100); do l=$(leader_of "$@"); [ -n "$l" ] && { L=${l#http://}; return; }; sleep 0.1; done; }
start_fence_etcd() {
  start_etcd
  for i in 1 2 3; do $FENCE_BIN serve --listen 127.0.0.1:3277$i --store etcd://127.0.0.1:32371,127.0.0.1:32372,127.0.0.1:32373/fence/ >$T/f$i.log 2>&1 & pids+=($!); done
  wait_leader http://127.0.0.1:32771 http://127.0.0.1:32772 http://127.0.0.1:32773
}
start_fence_pg() {
  T=$(mktemp -d -t fence-cluster-bench.XXXXXX); chmod 755 $T; mkdir $T/pg1 $T/pg2; chown postgres $T $T/pg1 $T/pg2; chmod 700 $T/pg1 $T/pg2
  runuser -u postgres -- $PGB/initdb -D $T/pg1 -U postgres -A trust >/dev/null
  printf "listen_addresses='127.0.0.1'\nport=32541\nunix_socket_directories='$T'\nwal_level=replica\nmax_wal_senders=4\nsynchronous_standby_names='s1'\n" >> $T/pg1/postgresql.conf
  echo "host replication postgres 127.0.0.1/32 trust" >> $T/pg1/pg_hba.conf
  runuser -u postgres -- $PGB/pg_ctl -D $T/pg1 -w -l $T/pg1/log start >/dev/null
  runuser -u postgres -- $PGB/pg_basebackup -D $T/pg2 -h 127.0.0.1 -p 32541 -U postgres -R -c fast -d "application_name=s1" >/dev/null
  sed -i "s/^port=32541/port=32542/; s/^synchronous_standby_names.*//" $T/pg2/postgresql.conf
  runuser -u postgres -- $PGB/pg_ctl -D $T/pg2 -w -l $T/pg2/log start >/dev/null
  for _ in $(seq 50); do [ "$(psql -h 127.0.0.1 -p 32541 -U postgres -Atc "select sync_state from pg_stat_replication")" = sync ] && break; sleep 0.2; done
  local url="postgres://postgres@127.0.0.1:32541,127.0.0.1:32542/postgres?sslmode=disable&target_session_attrs=read-write"
  for i in 1 2; do $FENCE_BIN serve --listen 127.0.0.1:3278$i --store "$url" >$T/p$i.log 2>&1 & pids+=($!); done
  wait_leader http://127.0.0.1:32781 http://127.0.0.1:32782
}
for r in $(seq $ROUNDS); do
  if has etcd; then
    start_etcd
    $PEERS -system etcd -addr 127.0.0.1:32371 -variant "etcd 3.4, 3 members" -round $r -dur $DUR -json $OUT -cases $CASES -quiet-max 20s -clean-retries 0
    stop_all
  fi
  for bin in $FENCE $BASE; do
    FENCE_BIN=$bin; tag=""; [ "$bin" = "$BASE" ] && tag=" (base)"
    if has fence-etcd; then
      start_fence_etcd; echo "fence$tag leader $L" >&2
      $PEERS -system fence -addr $L -variant "fence$tag, 3 servers on 3-member etcd" -round $r -dur $DUR -json $OUT -cases $CASES -quiet-max 20s -clean-retries 0
      stop_all
    fi
    if has fence-pg; then
      start_fence_pg; echo "fence-on-pg$tag leader $L" >&2
      $PEERS -system fence -addr $L -variant "fence$tag, 2 servers on PostgreSQL + sync standby" -round $r -dur $DUR -json $OUT -cases $CASES -quiet-max 20s -clean-retries 0
      stop_all
    fi
  done
done
$PEERS -mode report -json $OUT
