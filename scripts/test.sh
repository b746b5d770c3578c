#!/usr/bin/env bash
# The whole test suite: installs missing dependencies, then builds (warnings
# as errors, SG_WERROR) and tests
#   build/       gcc, RelWithDebInfo; on an AVX-512 host its numerics tests
#                (ctest -L numerics) run a second time with
#                ONEDNN_MAX_CPU_ISA=AVX2, so both kernel families are covered
#   build-asan/  clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer targets
#   build-tsan/  clang, ThreadSanitizer: the threaded parts (communication,
#                data-parallel runtime, global page table, health monitor)
# and ends with a summary that names every skipped test and one line
# "N passed, N failed" (totals over all runs).
#
# usage: scripts/test.sh [--quick] [-j N]
#   --quick  skip the sanitizer builds
#   -j N     parallel build and test jobs (default: number of CPUs)
# Environment: SG_FUZZ_SECONDS bounds the fuzzing test of the sanitizer build.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
quick=0
jobs=$(nproc 2>/dev/null || echo 2)

usage() { sed -n '2,17s/^# \{0,1\}//p' "$0"; }
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    -j) [ $# -ge 2 ] || { usage >&2; exit 2; }; jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "test.sh: -j needs a positive number, got '$jobs'" >&2; exit 2; }

bash scripts/install-deps.sh || { echo "test.sh: installing dependencies failed" >&2; echo "0 passed, 1 failed"; exit 1; }

total_passed=0
total_failed=0
summaries=()
skipped=()

# run_suite NAME DIR CMAKE_ARGS...: configure, build and run ctest in DIR
# (with the extra ctest arguments in the array ctest_args, if any).
ctest_args=()
run_suite() {
  local name=$1 dir=$2
  shift 2
  echo "=== $name: configure $dir"
  if ! cmake -S "$root" -B "$root/$dir" -G Ninja -DSG_WERROR=ON -DSG_FAULT_INJECTION=ON "$@"; then
    summaries+=("$name: configure FAILED")
    total_failed=$((total_failed + 1))
    return
  fi
  echo "=== $name: build $dir"
  # -k 0: build everything that can be built, so the tests that can run still do.
  local build_failed=0
  cmake --build "$root/$dir" -j "$jobs" -- -k 0 || build_failed=1
  run_ctest "$name" "$dir" "$build_failed"
}

# run_ctest NAME DIR BUILD_FAILED: ctest in DIR (extra arguments in
# ctest_args) and its counts into the totals; skipped tests are named.
run_ctest() {
  local name=$1 dir=$2 build_failed=$3
  local log="$root/$dir/ctest-${name//[^A-Za-z0-9]/_}.log"
  echo "=== $name: ctest"
  (cd "$root/$dir" && ctest --output-on-failure -j "$jobs" "${ctest_args[@]}") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  # ctest lists them as "  60 - comm_nccl_np1 (Skipped)".
  local s
  for s in $(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(Skipped\)$/\1/p' "$log"); do
    skipped+=("$s ($name)")
  done
  # ctest ends with "NN% tests passed, F tests failed out of T".
  local line
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    total_failed=$((total_failed + 1))
    summaries+=("$name: ctest produced no summary (exit $rc)$([ $build_failed -eq 1 ] && echo '; the build FAILED')")
    return
  fi
  local failed total
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
  local passed=$((total - failed))
  # A failed build, or ctest failing outside any test, counts once when no test failed.
  if { [ "$rc" -ne 0 ] || [ "$build_failed" -eq 1 ]; } && [ "$failed" -eq 0 ]; then failed=1; fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  summaries+=("$name: $passed passed, $failed failed$([ $build_failed -eq 1 ] && echo ' (the build FAILED)')")
}

run_suite "gcc" build -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo
# A library as users build it, without fault injection from the environment:
# SG_INJECT is refused there, sg_dist_params.inject still works (one test; the
# library and the two programs it needs only).
echo "=== no fault injection: configure build-noinject"
if cmake -S "$root" -B "$root/build-noinject" -G Ninja -DSG_WERROR=ON -DSG_FAULT_INJECTION=OFF \
     -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_BUILD_EXAMPLES=OFF >/dev/null; then
  noinject_failed=0
  cmake --build "$root/build-noinject" -j "$jobs" --target sgrt_cli heal_worker || noinject_failed=1
  ctest_args=(-R "^dist_inject_gate$")
  run_ctest "gcc, no fault injection" build-noinject "$noinject_failed"
  ctest_args=()
else
  summaries+=("gcc, no fault injection: configure FAILED")
  total_failed=$((total_failed + 1))
fi
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  # The same numerics with oneDNN's AVX2 kernels (8-channel blocks), as on
  # this machine kind's hosts without AVX-512.
  ctest_args=(-L numerics)
  ONEDNN_MAX_CPU_ISA=AVX2 run_ctest "gcc, numerics with ONEDNN_MAX_CPU_ISA=AVX2" build 0
  ctest_args=()
else
  summaries+=("(no AVX-512 on this host: the numerics ran with AVX2 kernels only)")
fi

if [ "$quick" -eq 0 ]; then
  fuzz_args=()
  [ -n "${SG_FUZZ_SECONDS:-}" ] && fuzz_args=(-DSG_FUZZ_SECONDS="$SG_FUZZ_SECONDS")
  export ASAN_OPTIONS=detect_leaks=1
  export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_suite "asan+ubsan" build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSG_SANITIZE=address,undefined -DSG_FUZZ=ON "${fuzz_args[@]}"
  # ThreadSanitizer on the tests of the layers that run threads of their own
  # (store server, scheduler thread, cross-thread abort), one compute thread
  # each; the multi-minute ResNet runs are left to the other builds.
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  ctest_args=(-R "^(comm_|dist_|gmem_|health_|test_health|test_comm)" -E "resnet|comm_big|no_false_positive")
  run_suite "tsan" build-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_SANITIZE=thread \
    -DSG_BUILD_EXAMPLES=OFF
  ctest_args=()
fi

echo
echo "=== summary"
for s in "${summaries[@]}"; do echo "  $s"; done
[ "$quick" -eq 1 ] && echo "  (sanitizer builds skipped: --quick)"
if [ ${#skipped[@]} -gt 0 ]; then
  echo "  skipped (${#skipped[@]}):"
  for s in "${skipped[@]}"; do echo "    $s"; done
else
  echo "  skipped: none"
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
