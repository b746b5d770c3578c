#!/usr/bin/env bash
# Healing a pipeline or a tensor group (docs/resilience.md): N ranks of
# `model_worker MODE` (ppheal: the MLP as a pipeline, rn_ppheal: ResNet-50,
# tpheal: the MLP as a tensor group), one stage or share per
# rank with sg_dist_params.heal = 1, a fault plan injected by
# `sgrt launch --inject SPEC`. Every survivor checks each step's count and loss
# and, at the end, its parameters against one process trained on the
# same batches (1e-5 L2 relative) and prints "HEALED rank R: ... recoveries K";
# the launcher's status is 0 only when the others died or left as excluded.
# EXPECT survivors must have recovered. With EXPECT = 0 the job must fail
# instead, every survivor with an error matching HEAL_ERROR. With HEAL_REF=1 a
# failure-free run of the same job goes first and is the reference of the
# parameters and the losses (HEAL_SAVE_DIR / HEAL_REF_DIR: model_worker.c),
# each parameter within HEAL_REF_TOL (L2 relative; default 1e-5).
#   usage: run_model_heal.sh SGRT WORKER DIR MODE N SPEC EXPECT [SEED]
set -u
sgrt=$1 worker=$2 dir=$3 mode=$4 n=$5 spec=$6 expect=$7 seed=${8:-0}
rm -rf "$dir" && mkdir -p "$dir/ref" || exit 1
if [ "${HEAL_REF:-0}" = 1 ]; then
  HEAL_SAVE_DIR=$dir/ref "$sgrt" launch --label -n "$n" -- "$worker" "$mode" > "$dir/ref/log" 2>&1 ||
    { cat "$dir/ref/log"; echo "run_model_heal: the failure-free run failed"; exit 1; }
  export HEAL_REF_DIR=$dir/ref
fi
SG_INJECT_SEED=$seed "$sgrt" launch --label --inject "$spec" -n "$n" -- "$worker" "$mode" > "$dir/log" 2>&1
rc=$?
cat "$dir/log"
if [ "$expect" = 0 ]; then
  [ "$rc" != 0 ] || { echo "run_model_heal: '$spec' was expected to stop the job, which finished"; exit 1; }
  k=$(grep -c -- "${HEAL_ERROR:?}" "$dir/log")
  [ "$k" -ge 1 ] || { echo "run_model_heal: no rank reported '$HEAL_ERROR'"; exit 1; }
  echo "run_model_heal: '$spec' stopped the job with '$HEAL_ERROR' ($k ranks)"
  exit 0
fi
[ "$rc" = 0 ] || { echo "run_model_heal: the job with '$spec' failed ($rc)"; exit 1; }
k=$(grep -c "HEALED rank .*recoveries [1-9]" "$dir/log")
[ "$k" = "$expect" ] || { echo "run_model_heal: $k ranks recovered, expected $expect"; exit 1; }
echo "run_model_heal: '$spec': $k survivors healed and match the failure-free run"
