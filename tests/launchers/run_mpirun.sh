#!/usr/bin/env bash
# Starts a job with Open MPI's mpirun, as docs/dist.md "Launchers" shows: the
# ranks read OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (sgrt does not call
# MPI itself; mpirun only starts the processes), MASTER_ADDR/MASTER_PORT and
# SG_JOB_TOKEN are exported with -x.
#
#   run_mpirun.sh NP -- COMMAND [ARGS...]
#
# Exit: COMMAND's status across ranks (mpirun's); 77 (skip) without mpirun.
set -u
[ $# -ge 3 ] && [ "$2" = "--" ] || { echo "usage: $0 NP -- COMMAND [ARGS...]" >&2; exit 2; }
np=$1
shift 2
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (Open MPI)"; exit 77; }
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29900 + $$ % 90))
SG_JOB_TOKEN=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
export SG_JOB_TOKEN
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
# --oversubscribe: more ranks than this machine's 2 cores; --bind-to none: each
# rank's compute threads may use every core, as with sgrt launch.
exec timeout 120 mpirun "${root[@]}" --oversubscribe --bind-to none -np "$np" -x MASTER_ADDR -x MASTER_PORT \
  -x SG_JOB_TOKEN -x SG_COMM_TIMEOUT_MS "$@"
