#!/usr/bin/env bash
# The death test: starts N ranks of `dist_worker death DIR` with torchrun-style
# variables (not `sgrt launch`, which would stop the survivors as soon as the
# victim dies, before they could detect it), and checks that rank 2 died of
# SIGKILL (status 137) and every other rank exited 1 after printing
# "DETECTED" with an error naming rank 2 (the worker checks the message and
# the 5 s limit with its own timer).   usage: run_death.sh N WORKER DIR
set -u
n=$1 worker=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
pids=()
for ((r = 0; r < n; r++)); do
  env -u SG_RANK -u SG_WORLD_SIZE -u SG_LOCAL_RANK RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port SG_JOB_TOKEN=$token \
    "$worker" death "$dir" >"$dir/out.$r" 2>&1 &
  pids+=($!)
done
ok=1
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}"
  rc=$?
  sed "s/^/[$r] /" "$dir/out.$r"
  if [ "$r" = 2 ]; then
    [ $rc = 137 ] || { echo "run_death: rank 2 exited $rc, expected 137 (SIGKILL)"; ok=0; }
  elif [ $rc != 1 ] || ! grep -q "^DETECTED rank $r: .*rank 2 " "$dir/out.$r"; then
    echo "run_death: rank $r exited $rc without detecting rank 2's death"
    ok=0
  fi
done
[ $ok = 1 ] && echo "run_death: every survivor failed with an error naming rank 2"
[ $ok = 1 ]
