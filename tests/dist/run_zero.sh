#!/usr/bin/env bash
# A ZeRO-1 equivalence test (docs/dist.md "ZeRO-1"): N ranks of zero_worker
# with plain data parallelism (zero 0), then with ZeRO-1 (zero 1) compared
# with it (1e-6 relative) and with one process (1e-4); every rank's
# parameters bitwise equal; each rank keeps about 1/N of the optimizer state.
#   usage: run_zero.sh SGRT WORKER DIR N sgd|adamw
set -u
sgrt=$1 worker=$2 dir=$3 n=$4 opt=$5
rm -rf "$dir" && mkdir -p "$dir/dp" "$dir/zero" || exit 1
"$sgrt" launch --label -n "$n" -- "$worker" zero "$dir/dp" "$opt" 0 || { echo "run_zero: the plain DP run failed"; exit 1; }
"$sgrt" launch --label -n "$n" -- "$worker" zero "$dir/zero" "$opt" 1 "$dir/dp" || { echo "run_zero: the ZeRO-1 run failed"; exit 1; }
echo "run_zero: $opt: ZeRO-1 on $n ranks matches plain DP and one process"
