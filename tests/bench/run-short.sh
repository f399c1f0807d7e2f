#!/usr/bin/env bash
# run-short.sh [BUILD_DIR] — runs every benchmark once in a short form, so that the README's
# bench commands keep compiling and working: each bench's own checks (every start reaches
# Running, no watch event is missed, recovery finds every QEMU alive, migrations succeed, the
# QMP count is read) fail it. The figures of a short run are not the README's (see its table
# for the full commands). Needs root; boots guests. Exits non-zero naming each bench that failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-$here/../../build}
bin=$build/bin

failed=()
# Runs one bench, prints its time and output, records a failure by name.
bench() {
  local name=$1
  shift
  local started=$SECONDS status
  echo "-- $name: $*"
  "$@"
  status=$?
  echo "   ($name: exit $status, $((SECONDS - started)) s)"
  [ "$status" -eq 0 ] || failed+=("$name")
}

bench manifest "$bin/manifest_bench" --benchmark_min_time=0.05
bench qmp python3 "$here/qmp-cpu-features.py" --runs 1
bench qmp-per-start python3 "$here/qmp-per-start.py" --runs 1
bench start "$bin/kvnode-bench-start" --runs 1
bench watch "$bin/kvnode-bench-watch" --events 20
bench density "$bin/kvnode-bench-density" --vmis 3 --idle 2s
bench density-floor "$bin/kvnode-bench-density" --vmis 3 --idle 2s --floor
bench density-embed "$bin/kvnode-bench-density" --vmis 2 --idle 2s --embed
bench migration "$bin/kvnode-bench-migration" --runs 1
bench pull "$bin/kvnode-bench-pull" --runs 1
bench snapshot "$bin/kvnode-bench-snapshot" --runs 1 --disk 16Mi
bench hotplug "$bin/kvnode-bench-hotplug" --rounds 1

if [ ${#failed[@]} -gt 0 ]; then
  echo "benchmarks FAILED: ${failed[*]}"
  exit 1
fi
echo "benchmarks: all ran and passed their checks"
