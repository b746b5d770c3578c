#!/usr/bin/env bash
# Starts N ranks of PROGRAM with torchrun-style variables set by hand (RANK,
# WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) instead of `sgrt launch`,
# and fails when any rank fails.   usage: run_torchrun.sh N PROGRAM ARGS...
set -u
n=$1; shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
pids=()
for ((r = 0; r < n; r++)); do
  env -u SG_RANK -u SG_WORLD_SIZE -u SG_LOCAL_RANK RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port SG_JOB_TOKEN=$token "$@" 2>&1 | sed "s/^/[$r] /" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
