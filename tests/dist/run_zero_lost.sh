#!/usr/bin/env bash
# ZeRO-1 recovery when a range's owner and its buddy are both lost
# (docs/resilience.md "Buddy replicas and recovery with ZeRO-1"): 5 ranks of
# heal_worker with HEAL_ZERO=1, ranks 1 and 2 (2 is 1's buddy) killed in the
# same step; the 3 survivors are a majority but rank 1's optimizer state is
# gone, so every survivor must stop with the error that says so, not hang or
# go on with wrong state.
#   usage: run_zero_lost.sh SGRT WORKER DIR
set -u
sgrt=$1 worker=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir/run" || exit 1
HEAL_ZERO=1 "$sgrt" launch --label --inject "kill:rank=1,step=4;kill:rank=2,step=4" -n 5 -- "$worker" "$dir/run" \
  > "$dir/log" 2>&1
rc=$?
cat "$dir/log"
[ "$rc" != 0 ] || { echo "run_zero_lost: the job succeeded without rank 1's optimizer state"; exit 1; }
n=$(grep -c "original ranks 1 and 2 (its buddy) were both lost" "$dir/log")
[ "$n" -ge 3 ] || { echo "run_zero_lost: $n survivors reported the lost state, expected 3"; exit 1; }
echo "run_zero_lost: the 3 survivors stopped, naming the lost range"
