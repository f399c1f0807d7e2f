#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, builds with -Werror, runs unit
# tests, the golden and bad-manifest suites, the integration tests (real libvirt + QEMU guests;
# needs root), and a short fuzz run. Usage: sudo bash tests/run-all.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash .ci/install-deps.sh

build=${KVNODE_BUILD_DIR:-$root/build}
# Benchmarks are built on demand (KVNODE_BUILD_BENCHMARKS=ON, the default of a plain cmake);
# the suite leaves them out to keep CI's build short.
cmake -S . -B "$build" -G Ninja -DKVNODE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVNODE_BUILD_BENCHMARKS="${KVNODE_BUILD_BENCHMARKS:-OFF}" >/dev/null
ninja -C "$build" -j"${KVNODE_JOBS:-2}"

echo "== unit tests"
ctest --test-dir "$build" -L unit --output-on-failure -j2 "$@"
echo "== integration tests (real libvirt and QEMU)"
ctest --test-dir "$build" -L integration --output-on-failure "$@"
if [ -x tests/fuzz/run-fuzz.sh ] || [ -f tests/fuzz/run-fuzz.sh ]; then
  echo "== fuzzing (short)"
  KVNODE_FUZZ_JOBS=${KVNODE_FUZZ_JOBS:-${KVNODE_JOBS:-2}} bash tests/fuzz/run-fuzz.sh
fi
echo "== all tests passed"
