#!/usr/bin/env bash
# run-fuzz.sh [RUNS] — builds the libFuzzer targets in their own clang build dir (ASan + UBSan,
# every library coverage-instrumented; debug info is line tables only, enough for a sanitizer's
# stack) and runs each for RUNS inputs (default 20000): manifest_fuzzer with inputs of at most
# 8192 bytes from the seed corpus tests/fuzz/corpus (the golden manifests), dhcp_fuzzer (what a
# guest sends its launcher's DHCP server) with packets of at most 1500 bytes from
# tests/fuzz/corpus-dhcp.
# Exits non-zero if the build fails or the fuzzer finds a crash, leak or sanitizer report; the
# crashing input is kept under the build dir's fuzz/artifacts/.
#
# Environment:
#   KVNODE_FUZZ_BUILD_DIR  build dir (default <source>/build-fuzz)
#   KVNODE_FUZZ_JOBS       ninja -j (default 1)
#   KVNODE_FUZZ_MAX_LEN    -max_len (default 8192)
#   KVNODE_FUZZ_SEED       -seed (default 1, so a CI run is reproducible)
# The precompiled header is off here: three translation units do not pay for making it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${KVNODE_FUZZ_BUILD_DIR:-$src/build-fuzz}
runs=${1:-20000}
case "$runs" in '' | *[!0-9]*) echo "run-fuzz: RUNS must be a number, not '$runs'" >&2; exit 2 ;; esac

for tool in clang clang++ cmake ninja; do
	command -v "$tool" >/dev/null || { echo "run-fuzz: missing $tool" >&2; exit 2; }
done

cmake -S "$src" -B "$build" -G Ninja \
	-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
	-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
	-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
	-DKVNODE_BUILD_FUZZERS=ON -DKVNODE_SANITIZE=ON \
	-DKVNODE_BUILD_BENCHMARKS=OFF -DKVNODE_PCH=OFF >/dev/null
ninja -C "$build" -j"${KVNODE_FUZZ_JOBS:-1}" manifest_fuzzer dhcp_fuzzer

# New inputs go to a scratch corpus in the build dir; the seeds in the source tree stay as
# they are.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fuzz() {  # fuzz TARGET SEEDS MAX_LEN
	local work="$build/fuzz/$1"
	mkdir -p "$work/corpus" "$work/artifacts"
	"$build/bin/$1_fuzzer" \
		-runs="$runs" -max_len="$3" -seed="${KVNODE_FUZZ_SEED:-1}" \
		-artifact_prefix="$work/artifacts/" -print_final_stats=1 \
		"$work/corpus" "$2"
}
fuzz manifest "$here/corpus" "${KVNODE_FUZZ_MAX_LEN:-8192}"
fuzz dhcp "$here/corpus-dhcp" 1500
