#!/usr/bin/env bash
# tcg-migration-check.sh [options] — does a guest survive a slow live migration under TCG?
#
# Two plain QEMU processes on this host (TCG, no libvirt, no kvnode), the kvnode test guest booted
# from its kernel and initramfs (128 MiB, q35, as kvnode's VMIs), one migrated to the other over
# loopback TCP with QEMU's bandwidth limit. The guest prints KVNODE-GUEST-TICK every second; the
# run passes when the target keeps printing them with the same boot id after the migration and
# fails when it prints nothing for 20 s (the guest was delivered damaged).
#
# Written for migration chaos finding (3): QEMU before 9.0 loses guest writes under TCG during a
# live migration (the dirty-bitmap fast path clears bits without marking the vCPUs' TLB entries
# not-dirty again; fixed upstream by 03bfc2188f "physmem: Fix migration dirty bitmap coherency
# with TCG memory access", not in Debian 12's 7.2). `--mode paused` stops the vCPUs before the
# first page is sent (what libvirt does without VIR_MIGRATE_LIVE), which needs no dirty tracking.
#
# Options:
#   --qemu PATH          QEMU binary (default qemu-system-x86_64)
#   --bandwidth-mib N    migration bandwidth in MiB/s (default 1; 0 = QEMU's default limit)
#   --runs N             migrations, each with a fresh pair of QEMUs (default 1)
#   --mode live|paused   (default live)
#   --guest-out DIR      where build-guest.sh puts the guest (default /tmp/kvnode-guest)
# Prints one line per run and a summary; exits 1 if any run lost its guest. QEMU processes are
# ended by their pid on every exit path.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
qemu=qemu-system-x86_64
bandwidth=1
runs=1
mode=live
guest_out=${KVNODE_GUEST_OUT:-/tmp/kvnode-guest}

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--qemu) qemu=${2:?--qemu needs a path}; shift 2 ;;
	--bandwidth-mib) bandwidth=${2:?--bandwidth-mib needs a number}; shift 2 ;;
	--runs) runs=${2:?--runs needs a number}; shift 2 ;;
	--mode) mode=${2:?--mode needs live or paused}; shift 2 ;;
	--guest-out) guest_out=${2:?--guest-out needs a directory}; shift 2 ;;
	-h | --help) usage ;;
	*) echo "tcg-migration-check: unknown argument '$1'" >&2; usage ;;
	esac
done
[[ $bandwidth =~ ^[0-9]+$ ]] || { echo "tcg-migration-check: --bandwidth-mib must be a whole number, not '$bandwidth'" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "tcg-migration-check: --runs must be a positive number, not '$runs'" >&2; exit 2; }
case "$mode" in live | paused) ;; *) echo "tcg-migration-check: --mode must be live or paused, not '$mode'" >&2; exit 2 ;; esac
command -v "$qemu" >/dev/null || { echo "tcg-migration-check: --qemu: no such program '$qemu'" >&2; exit 2; }
command -v python3 >/dev/null || { echo "tcg-migration-check: needs python3" >&2; exit 2; }

"$here/build-guest.sh" "$guest_out" >/dev/null || { echo "tcg-migration-check: build-guest.sh failed" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kvnode-tcg-migration.XXXXXX")
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	PIDS=()
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

# qmp SOCKET JSON...: each command in turn on one QMP connection; prints each "return" as JSON.
qmp() {
	python3 - "$@" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
json.loads(f.readline())  # greeting
def call(cmd):
    f.write(json.dumps(cmd) + "\n"); f.flush()
    while True:
        m = json.loads(f.readline())
        if "return" in m:
            return m["return"]
        if "error" in m:
            sys.exit("qmp %s: %s" % (cmd["execute"], m["error"]["desc"]))
call({"execute": "qmp_capabilities"})
for a in sys.argv[2:]:
    print(json.dumps(call(json.loads(a))))
EOF
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ticks() { tr -d '\r' < "$1" | grep -a '^KVNODE-GUEST-TICK ' || true; }
# start NAME ARGS...: QEMU in the background, console in $work/NAME.log, QMP on $work/NAME.qmp.
start() {
	local name=$1
	shift
	: > "$work/$name.log"
	"$qemu" -accel tcg -machine q35 -m 128 -nodefaults -no-user-config -display none \
		-kernel "$guest_out/vmlinuz" -initrd "$guest_out/initrd.gz" -append "$(cat "$guest_out/cmdline")" \
		-serial "file:$work/$name.log" -qmp "unix:$work/$name.qmp,server=on,wait=off" "$@" \
		> "$work/$name.err" 2>&1 < /dev/null &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -S "$work/$name.qmp" ] && return 0; sleep 0.1; done
	echo "tcg-migration-check: $name: no QMP socket: $(cat "$work/$name.err")" >&2
	return 1
}

lost=0
kept=0
for run in $(seq "$runs"); do
	rm -f "$work"/*.qmp
	start source || exit 1
	for _ in $(seq 120); do [ -n "$(ticks "$work/source.log")" ] && break; sleep 0.5; done
	boot=$(ticks "$work/source.log" | head -n1 | sed 's/.*boot_id=//')
	[ -n "$boot" ] || { echo "tcg-migration-check: the source guest did not boot in 60 s" >&2; exit 1; }
	sleep 3
	port=$(free_port)
	start target -incoming defer || exit 1
	qmp "$work/target.qmp" "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"tcp:127.0.0.1:$port\"}}" >/dev/null || exit 1
	[ "$mode" = paused ] && { qmp "$work/source.qmp" '{"execute":"stop"}' >/dev/null || exit 1; }
	limit=$((bandwidth * 1024 * 1024))
	[ "$bandwidth" -eq 0 ] && limit=134217728
	t0=$(date +%s%N)
	qmp "$work/source.qmp" \
		"{\"execute\":\"migrate-set-parameters\",\"arguments\":{\"max-bandwidth\":$limit}}" \
		"{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"tcp:127.0.0.1:$port\"}}" >/dev/null || exit 1
	status=
	while :; do
		status=$(qmp "$work/source.qmp" '{"execute":"query-migrate"}' | python3 -c 'import json,sys; print(json.load(sys.stdin).get("status",""))')
		case "$status" in completed | failed | cancelled) break ;; esac
		sleep 1
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$status" != completed ]; then
		echo "tcg-migration-check: run $run: migration $status" >&2
		exit 1
	fi
	[ "$mode" = paused ] && { qmp "$work/target.qmp" '{"execute":"cont"}' >/dev/null || exit 1; }
	last_source=$(ticks "$work/source.log" | tail -n1 | sed 's/^KVNODE-GUEST-TICK n=\([0-9]*\).*/\1/')
	verdict=lost
	for _ in $(seq 40); do
		if ticks "$work/target.log" | grep -q "boot_id=$boot"; then verdict=kept; break; fi
		sleep 0.5
	done
	first_target=$(ticks "$work/target.log" | head -n1 | sed 's/^KVNODE-GUEST-TICK n=\([0-9]*\).*/\1/')
	if [ "$verdict" = kept ]; then
		kept=$((kept + 1))
		echo "run $run: kept   migration ${ms} ms, source's last tick n=$last_source, target's first n=$first_target"
	else
		lost=$((lost + 1))
		echo "run $run: LOST   migration ${ms} ms (completed), source's last tick n=$last_source, target silent for 20 s; its console:"
		tr -d '\r' < "$work/target.log" | tail -n 12 | sed 's/^/    /'
	fi
	cleanup
done
echo "$($qemu --version | head -n1), mode $mode, ${bandwidth} MiB/s: $kept kept, $lost lost of $runs"
[ "$lost" -eq 0 ]
