#!/usr/bin/env bash
# boot-test.sh [OUTDIR] — builds the kvnode test guest (build-guest.sh OUTDIR, default
# ${KVNODE_GUEST_OUT:-/tmp/kvnode-guest}) and boots it directly with QEMU (TCG, no libvirt) to
# check what it promises: boot and tick markers, the ACPI power button on q35 and pc, every mode
# (from the boot disk and from the kernel command line), DHCP + HTTP through QEMU user
# networking, the outbound connect, the data-disk counter and cloud-init NoCloud (virtio disk,
# IDE cdrom, virtio-scsi cdrom). Prints PASS/FAIL per check; exits 1 if any check failed.
# QEMU processes are ended by their pid on every exit path. Logs of a failed run are kept in
# OUTDIR/boot-test-logs/.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-${KVNODE_GUEST_OUT:-/tmp/kvnode-guest}}
BOOT_TIMEOUT=${KVNODE_GUEST_BOOT_TIMEOUT:-60}

for tool in qemu-system-x86_64 python3 curl mcopy; do
	command -v "$tool" >/dev/null || { echo "boot-test: missing $tool" >&2; exit 2; }
done
"$here/build-guest.sh" "$out" || { echo "FAIL: build-guest.sh $out"; exit 1; }
base="$out/guest.img"

rm -rf "$out/boot-test-logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/kvnode-guest-test.XXXXXX")
PIDS=()
fails=0
passes=0

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 30); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	if [ "$fails" -gt 0 ]; then
		rm -rf "$out/boot-test-logs"
		mkdir -p "$out/boot-test-logs"
		cp "$work"/*.log "$work"/*.err "$out/boot-test-logs/" 2>/dev/null
		echo "boot-test: logs kept in $out/boot-test-logs"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
	if [ -n "${CUR:-}" ] && [ -f "$work/$CUR.log" ]; then
		echo "---- last lines of $CUR console ----"
		tail -n 15 "$work/$CUR.log" | sed 's/^/    /'
		[ -s "$work/$CUR.err" ] && sed 's/^/    qemu: /' "$work/$CUR.err"
		echo "----"
	fi
}
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

declare -A VM_PID=() VM_T0=()
# start_vm NAME MACHINE QEMU-ARGS...: boots in the background; console in $work/NAME.log,
# human monitor on the unix socket $work/NAME.mon.
start_vm() {
	local name=$1 machine=$2
	shift 2
	CUR=$name
	: > "$work/$name.log"
	VM_T0[$name]=$(now_ms)
	qemu-system-x86_64 -accel tcg -machine "$machine" -m 256 -nodefaults -no-user-config \
		-display none -serial "file:$work/$name.log" \
		-monitor "unix:$work/$name.mon,server=on,wait=off" "$@" \
		> "$work/$name.err" 2>&1 < /dev/null &
	VM_PID[$name]=$!
	PIDS+=("$!")
}
alive() { kill -0 "${VM_PID[$1]}" 2>/dev/null; }
# wait_for NAME ERE [TIMEOUT]: until the console shows a line matching ERE; fails early if QEMU
# has exited. (Console lines end in \r\n: the tty's onlcr.)
wait_for() {
	local name=$1 re=$2 deadline=$(($(date +%s) + ${3:-$BOOT_TIMEOUT}))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		tr -d '\r' < "$work/$name.log" | grep -aEq -- "$re" && return 0
		alive "$name" || { tr -d '\r' < "$work/$name.log" | grep -aEq -- "$re"; return; }
		sleep 0.05
	done
	return 1
}
# wait_exit NAME TIMEOUT: until QEMU exits; the exit status is left in EXIT_STATUS.
wait_exit() {
	local name=$1 deadline=$(($(date +%s) + $2))
	EXIT_STATUS=
	while alive "$name"; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.1
	done
	wait "${VM_PID[$name]}" 2>/dev/null
	EXIT_STATUS=$?
	return 0
}
stop_vm() {
	local pid=${VM_PID[$1]}
	kill "$pid" 2>/dev/null
	for _ in $(seq 30); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
monitor() { # monitor NAME COMMAND: one human-monitor command over the unix socket
	python3 - "$work/$1.mon" "$2" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
buf = b""
while b"(qemu)" not in buf:
    d = s.recv(4096)
    if not d:
        break
    buf += d
s.sendall(sys.argv[2].encode() + b"\n")
time.sleep(0.2)
s.close()
EOF
}
marker() { # marker NAME PREFIX: the rest of the first console line starting with PREFIX
	grep -a -m1 -- "^$2" "$work/$1.log" | tr -d '\r' | sed "s/^$2//"
}
boot_id_of() { marker "$1" 'KVNODE-GUEST-BOOTED boot_id=' | awk '{print $1}'; }
new_image() { # new_image NAME: a private copy of the base image
	cp --sparse=always "$base" "$work/$1.img"
	echo "$work/$1.img"
}
# shellcheck disable=SC2054 # commas belong to QEMU options
boot_disk() { BOOT=(-drive "file=$1,if=none,id=boot,format=raw" -device virtio-blk-pci,drive=boot,bootindex=0); }

# --- fixtures --------------------------------------------------------------------------------------
mkdir -p "$work/cidata"
printf '#cloud-config\n#kvnode-marker: marker-%s\n#kvnode-marker: not-this-one\n' "$$" > "$work/cidata/user-data"
printf 'instance-id: iid-kvnode-%s\nlocal-hostname: ci-host\n' "$$" > "$work/cidata/meta-data"
CIDATA_KIND=iso9660
if command -v genisoimage >/dev/null; then
	genisoimage -quiet -o "$work/cidata.iso" -V cidata -J -r "$work/cidata/user-data" "$work/cidata/meta-data"
elif command -v xorriso >/dev/null; then
	xorriso -as mkisofs -quiet -o "$work/cidata.iso" -V cidata -J -r "$work/cidata/user-data" "$work/cidata/meta-data" 2>/dev/null
else
	echo "boot-test: note: neither genisoimage nor xorriso; using a vfat cidata disk instead of an ISO"
	CIDATA_KIND=vfat
	truncate -s 2M "$work/cidata.iso"
	mkfs.vfat -n CIDATA "$work/cidata.iso" >/dev/null
	MTOOLS_SKIP_CHECK=1 mcopy -i "$work/cidata.iso" "$work/cidata/user-data" "$work/cidata/meta-data" ::
fi
truncate -s 1M "$work/data.raw"

# --- 1. q35, normal: boot, ticks, cloud-init (virtio disk), data disk, DHCP, HTTP, connect, ACPI -----
img=$(new_image q35)
http=$(free_port)
http2=$(free_port)
lport=$(free_port)
"$here/set-connect.sh" "$img" "10.0.2.2:$lport"
python3 - "$lport" "$work/connect.got" > "$work/listener.err" 2>&1 <<'EOF' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1)
s.settimeout(120)
c, _ = s.accept()
c.settimeout(10)
data = b""
while True:
    d = c.recv(4096)
    if not d:
        break
    data += d
open(sys.argv[2], "wb").write(data)
EOF
PIDS+=("$!")
boot_disk "$img"
start_vm q35 q35 "${BOOT[@]}" \
	-drive "file=$work/data.raw,if=virtio,format=raw" \
	-drive "file=$work/cidata.iso,if=virtio,format=raw,readonly=on" \
	-netdev "user,id=n0,hostname=dhcp-host,hostfwd=tcp:127.0.0.1:$http-:80,hostfwd=tcp:127.0.0.1:$http2-:8080" \
	-device virtio-net-pci,netdev=n0
if wait_for q35 '^KVNODE-GUEST-BOOTED boot_id=[0-9a-f-]{36}'; then
	t=$(($(now_ms) - VM_T0[q35]))
	BOOT_MS=$t
	pass "q35: KVNODE-GUEST-BOOTED after $((t / 1000)).$(printf %03d $((t % 1000))) s"
else
	fail "q35: no KVNODE-GUEST-BOOTED within ${BOOT_TIMEOUT}s"
fi
id=$(boot_id_of q35)
ticks_ok() {
	wait_for q35 '^KVNODE-GUEST-TICK n=3 ' 20 || return 1
	local want
	want=$(printf 'n=1 boot_id=%s\nn=2 boot_id=%s\nn=3 boot_id=%s' "$id" "$id" "$id")
	[ "$(marker_all q35 'KVNODE-GUEST-TICK ' | head -n 3)" = "$want" ]
}
marker_all() { grep -a -- "^$2" "$work/$1.log" | tr -d '\r' | sed "s/^$2//"; }
check "q35: ticks n=1,2,3 with the boot id" ticks_ok
check "q35: cloud-init user-data marker (virtio $CIDATA_KIND)" \
	wait_for q35 "^KVNODE-GUEST-USERDATA #kvnode-marker: marker-$$\$" 30
check "q35: cloud-init instance-id" wait_for q35 "^KVNODE-GUEST-INSTANCE-ID iid-kvnode-$$\$" 30
check "q35: data disk counter=1 on a blank disk" wait_for q35 '^KVNODE-GUEST-DATA counter=1 dev=vdb' 30
check "q35: DHCP address on eth0" wait_for q35 '^KVNODE-GUEST-IP eth0 10\.0\.2\.15( |$)' 40
page_ok() { # page_ok PORT EXPECTED-SUBSTRING
	local body
	body=$(curl -fsS --max-time 10 "http://127.0.0.1:$1/") || return 1
	case "$body" in *"$2"*) return 0 ;; esac
	echo "    got: $body"
	return 1
}
check "q35: HTTP :80 serves boot id and hostname (cloud-init local-hostname wins over DHCP)" \
	page_ok "$http" "kvnode-guest boot_id=$id hostname=ci-host"
check "q35: HTTP :8080 answers" page_ok "$http2" "port=8080"
connect_ok() {
	wait_for q35 '^KVNODE-GUEST-CONNECT ok' 40 || return 1
	for _ in $(seq 50); do [ -s "$work/connect.got" ] && break; sleep 0.1; done
	[ "$(cat "$work/connect.got" 2>/dev/null)" = "kvnode-guest boot_id=$id" ]
}
check "q35: outbound connect to the host, sent the boot id" connect_ok
wait_for q35 '^KVNODE-GUEST-READY' 40 >/dev/null
monitor q35 system_powerdown
powered_off() { # powered_off NAME REASON
	wait_for "$1" "^KVNODE-GUEST-POWEROFF reason=$2\$" 30 && wait_exit "$1" 30 && [ "$EXIT_STATUS" = 0 ]
}
check "q35: ACPI power button -> POWEROFF reason=acpi, QEMU exits 0" powered_off q35 acpi

# --- 2. pc: power button, IDE cdrom cloud-init, same data disk again (counter=2) --------------------
img=$(new_image pc)
boot_disk "$img"
start_vm pc pc "${BOOT[@]}" \
	-drive "file=$work/data.raw,if=virtio,format=raw" \
	-drive "file=$work/cidata.iso,if=ide,media=cdrom"
check "pc: booted" wait_for pc '^KVNODE-GUEST-BOOTED boot_id='
check "pc: cloud-init from an IDE cdrom" wait_for pc "^KVNODE-GUEST-USERDATA #kvnode-marker: marker-$$\$" 30
check "pc: data disk counter=2 on the second boot" wait_for pc '^KVNODE-GUEST-DATA counter=2 dev=vdb' 30
check "pc: the first sector holds the counter" \
	bash -c "head -c 21 '$work/data.raw' | grep -qx 'KVNODE-DATA counter=2'"
monitor pc system_powerdown
check "pc: ACPI power button -> POWEROFF reason=acpi, QEMU exits 0" powered_off pc acpi

# --- 3. ignore-acpi; DHCP hostname; a NIC without DHCP server ---------------------------------------
img=$(new_image ignore)
"$here/set-mode.sh" "$img" ignore-acpi
http=$(free_port)
boot_disk "$img"
start_vm ignore q35 "${BOOT[@]}" \
	-netdev "user,id=n0,hostname=dhcp-host,hostfwd=tcp:127.0.0.1:$http-:80" -device virtio-net-pci,netdev=n0 \
	-netdev hubport,id=n1,hubid=7 -device virtio-net-pci,netdev=n1
check "ignore-acpi: booted in mode ignore-acpi" wait_for ignore '^KVNODE-GUEST-MODE mode=ignore-acpi '
wait_for ignore '^KVNODE-GUEST-BOOTED' >/dev/null
monitor ignore system_powerdown
ignored_ok() {
	wait_for ignore '^KVNODE-GUEST-ACPI-IGNORED$' 20 || return 1
	local n1 n2
	n1=$(grep -ac '^KVNODE-GUEST-TICK' "$work/ignore.log")
	sleep 3
	n2=$(grep -ac '^KVNODE-GUEST-TICK' "$work/ignore.log")
	alive ignore && [ "$n2" -gt "$n1" ] && ! grep -aq '^KVNODE-GUEST-POWEROFF' "$work/ignore.log"
}
check "ignore-acpi: power button ignored, still ticking 3 s later" ignored_ok
check "ignore-acpi: DHCP on eth0" wait_for ignore '^KVNODE-GUEST-IP eth0 10\.0\.2\.15' 40
id=$(boot_id_of ignore)
check "ignore-acpi: HTTP page carries the DHCP hostname" page_ok "$http" "kvnode-guest boot_id=$id hostname=dhcp-host"
check "ignore-acpi: a NIC without DHCP server reports none" wait_for ignore '^KVNODE-GUEST-IP eth1 none$' 60
stop_vm ignore

# --- 4. poweroff mode (boot disk file) --------------------------------------------------------------
img=$(new_image poweroff)
"$here/set-mode.sh" "$img" poweroff 1
boot_disk "$img"
start_vm poweroff q35 "${BOOT[@]}"
check "poweroff: booted in mode poweroff delay=1" wait_for poweroff '^KVNODE-GUEST-MODE mode=poweroff delay=1$'
check "poweroff: powers itself off, QEMU exits 0" powered_off poweroff mode

# --- 5. panic mode: the kernel panics and stays down (panic=0) ---------------------------------------
img=$(new_image panic)
"$here/set-mode.sh" "$img" panic 1
boot_disk "$img"
start_vm panic q35 "${BOOT[@]}"
check "panic: booted in mode panic" wait_for panic '^KVNODE-GUEST-MODE mode=panic delay=1$'
check "panic: kernel panic on the console" wait_for panic 'Kernel panic - not syncing' 30
stays_down() {
	local n1 n2
	n1=$(grep -ac '^KVNODE-GUEST-TICK' "$work/panic.log")
	sleep 4
	n2=$(grep -ac '^KVNODE-GUEST-TICK' "$work/panic.log")
	alive panic && [ "$n1" = "$n2" ] && [ "$(grep -ac '^KVNODE-GUEST-BOOTED' "$work/panic.log")" = 1 ]
}
check "panic: no reboot, no more ticks, QEMU still running 4 s later" stays_down
stop_vm panic
# With a pvpanic device (libvirt <panic model='isa'/>) QEMU learns of the panic.
img=$(new_image pvpanic)
"$here/set-mode.sh" "$img" panic 0
boot_disk "$img"
start_vm pvpanic q35 "${BOOT[@]}" -device pvpanic -action panic=exit-failure
pvpanic_ok() { wait_for pvpanic '^KVNODE-GUEST-PANIC' && wait_exit pvpanic 30 && [ "$EXIT_STATUS" = 1 ]; }
check "panic: seen by QEMU through pvpanic (QEMU exits 1 with -action panic=exit-failure)" pvpanic_ok

# --- 6. mode from the kernel command line, and the file winning over it -------------------------------
img=$(new_image cmdline)
start_vm cmdline q35 -drive "file=$img,if=virtio,format=raw" -kernel "$out/vmlinuz" -initrd "$out/initrd.gz" \
	-append "$(cat "$out/cmdline") kvnode.mode=poweroff kvnode.delay=1"
check "cmdline: kvnode.mode=poweroff kvnode.delay=1 applies" wait_for cmdline '^KVNODE-GUEST-MODE mode=poweroff delay=1$'
check "cmdline: powers itself off" powered_off cmdline mode
img=$(new_image filewins)
"$here/set-mode.sh" "$img" poweroff 1
start_vm filewins q35 -drive "file=$img,if=virtio,format=raw" -kernel "$out/vmlinuz" -initrd "$out/initrd.gz" \
	-append "$(cat "$out/cmdline") kvnode.mode=panic kvnode.delay=5"
check "file wins: mode file poweroff beats kvnode.mode=panic" wait_for filewins '^KVNODE-GUEST-MODE mode=poweroff delay=1$'
check "file wins: powers itself off" powered_off filewins mode

# --- 7. virtio-scsi: cloud-init cdrom and a SCSI data disk ---------------------------------------------
img=$(new_image scsi)
truncate -s 1M "$work/scsi-data.raw"
boot_disk "$img"
start_vm scsi q35 "${BOOT[@]}" -device virtio-scsi-pci,id=scsi0 \
	-drive "file=$work/cidata.iso,if=none,id=cd0,media=cdrom,readonly=on" -device scsi-cd,drive=cd0,bus=scsi0.0 \
	-drive "file=$work/scsi-data.raw,if=none,id=d1,format=raw" -device scsi-hd,drive=d1,bus=scsi0.0
check "scsi: cloud-init from a virtio-scsi cdrom" wait_for scsi "^KVNODE-GUEST-INSTANCE-ID iid-kvnode-$$\$"
check "scsi: data disk counter=1 on a SCSI disk" wait_for scsi '^KVNODE-GUEST-DATA counter=1 dev=sda' 30
wait_for scsi '^KVNODE-GUEST-READY' 40 >/dev/null
monitor scsi system_powerdown
check "scsi: power button" powered_off scsi acpi

CUR=
echo
[ -n "${BOOT_MS:-}" ] && echo "boot time (QEMU start to KVNODE-GUEST-BOOTED, q35, TCG): ${BOOT_MS} ms"
echo "boot-test: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
