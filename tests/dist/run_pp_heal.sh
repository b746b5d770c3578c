#!/usr/bin/env bash
# Healing a pipeline (docs/resilience.md "Healing a pipeline"): N ranks of
# `model_worker MODE` (ppheal: the MLP, rn_ppheal: ResNet-50), one stage per
# rank with sg_dist_params.heal = 1, a fault plan injected by
# `sgrt launch --inject SPEC`. Every survivor checks each step's count and loss
# and, at the end, its stage's parameters against one process trained on the
# same batches (1e-5 L2 relative) and prints "PPHEAL rank R: ... recoveries K";
# the launcher's status is 0 only when the others died or left as excluded.
# EXPECT survivors must have recovered. With EXPECT = 0 the job must fail
# instead, every survivor with an error matching PP_HEAL_ERROR.
#   usage: run_pp_heal.sh SGRT WORKER DIR MODE N SPEC EXPECT [SEED]
set -u
sgrt=$1 worker=$2 dir=$3 mode=$4 n=$5 spec=$6 expect=$7 seed=${8:-0}
rm -rf "$dir" && mkdir -p "$dir" || exit 1
SG_INJECT_SEED=$seed "$sgrt" launch --inject "$spec" -n "$n" -- "$worker" "$mode" > "$dir/log" 2>&1
rc=$?
cat "$dir/log"
if [ "$expect" = 0 ]; then
  [ "$rc" != 0 ] || { echo "run_pp_heal: '$spec' was expected to stop the job, which finished"; exit 1; }
  k=$(grep -c -- "${PP_HEAL_ERROR:?}" "$dir/log")
  [ "$k" -ge 1 ] || { echo "run_pp_heal: no rank reported '$PP_HEAL_ERROR'"; exit 1; }
  echo "run_pp_heal: '$spec' stopped the job with '$PP_HEAL_ERROR' ($k ranks)"
  exit 0
fi
[ "$rc" = 0 ] || { echo "run_pp_heal: the job with '$spec' failed ($rc)"; exit 1; }
k=$(grep -c "PPHEAL rank .*recoveries [1-9]" "$dir/log")
[ "$k" = "$expect" ] || { echo "run_pp_heal: $k ranks recovered, expected $expect"; exit 1; }
echo "run_pp_heal: '$spec': $k survivors healed the pipeline and match the failure-free run"
