#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, builds with -Werror, runs unit
# tests, the golden and bad-manifest suites, the integration tests (real libvirt + QEMU guests;
# needs root), the quickstart, every benchmark once in a short form, and a short fuzz run.
# Usage: sudo bash tests/run-all.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

started=$(date +%s)
stage_started=""
# Prints how long the previous stage took, then the next stage's title.
stage() {
  local now
  now=$(date +%s)
  [ -z "$stage_started" ] || echo "   (took $((now - stage_started)) s)"
  stage_started=$now
  [ $# -eq 0 ] || echo "== $*"
}

stage "dependencies"
bash .ci/install-deps.sh

build=${KVNODE_BUILD_DIR:-$root/build}
# The benchmarks are built (so that a change that breaks one fails here) and run once in a short
# form below. The suite builds as a plain cmake does (-O2, NDEBUG) but without debug info, which
# costs about a third of the compile time of the larger files and no test needs.
stage "build"
cmake -S . -B "$build" -G Ninja -DKVNODE_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DKVNODE_BUILD_BENCHMARKS=ON >/dev/null
ninja -C "$build" -j"${KVNODE_JOBS:-2}"

# Each ctest run goes on after a failure so that one report shows everything; the counts of
# every run are summed: a skipped test is counted as skipped, never as passed.
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run_ctest() {
  local status
  set +e
  ctest --test-dir "$build" "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  # ctest failed with no test failing (a bad argument), or found no test: a failure too.
  if grep -q 'No tests were found' "$log" ||
     { [ "$status" -ne 0 ] && ! grep -qE '\*\*\*(Failed|Timeout|Exception)' "$log"; }; then
    echo "ctest $* exited $status"
    failed=$((failed + 1))
  fi
  passed=$((passed + $(grep -cE 'Test +#[0-9]+: .* Passed ' "$log" || true)))
  skipped=$((skipped + $(grep -cE 'Test +#[0-9]+: .*(\*\*\*Skipped|\*\*\*Not Run)' "$log" || true)))
  failed=$((failed + $(grep -cE 'Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)' "$log" || true)))
}

stage "unit tests"
run_ctest -L unit --output-on-failure -j2 "$@"
stage "integration tests (real libvirt and QEMU)"
run_ctest -L integration --output-on-failure "$@"
stage "quickstart (the README's first command, with its own state dir and socket)"
quickstart_status=0
bash tests/e2e/quickstart-ci.sh || quickstart_status=$?
if [ "$quickstart_status" -ne 0 ]; then failed=$((failed + 1)); fi
stage "benchmarks (each once, in a short form)"
bench_status=0
bash tests/bench/run-short.sh "$build" || bench_status=$?
if [ "$bench_status" -ne 0 ]; then failed=$((failed + 1)); fi
stage "fuzzing (short)"
fuzz_status=0
KVNODE_FUZZ_JOBS=${KVNODE_FUZZ_JOBS:-${KVNODE_JOBS:-2}} bash tests/fuzz/run-fuzz.sh || fuzz_status=$?
stage
echo "== $passed passed, $failed failed, $skipped skipped (ctest, the quickstart: $([ $quickstart_status -eq 0 ] && echo passed || echo FAILED), the benchmarks: $([ $bench_status -eq 0 ] && echo passed || echo FAILED)); fuzzing $([ $fuzz_status -eq 0 ] && echo passed || echo "FAILED ($fuzz_status)"); total $(( $(date +%s) - started )) s"
if [ "$failed" -gt 0 ] || [ "$fuzz_status" -ne 0 ]; then
  exit 1
fi
if [ "$skipped" -gt 0 ] && [ "${CI:-}" = true ]; then
  echo "== skipped tests are failures in CI (CI=true)"
  exit 1
fi
echo "== all tests passed"
