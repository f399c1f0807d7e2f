#!/usr/bin/env bash
# set-mode.sh IMAGE MODE [DELAY] — chooses the behaviour of the kvnode test guest in an existing
# image (a copy of guest.img) by rewriting the file "mode" on its FAT boot filesystem with mtools:
# no mount, no root, milliseconds. MODE: normal | ignore-acpi | poweroff | panic | flood (prints
# to its console without pause once booted). DELAY: seconds
# before poweroff/panic (default 2). MODE "default" deletes the file, so that kvnode.mode= on the
# kernel command line (or normal) applies again.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then echo "usage: $0 IMAGE MODE [DELAY]" >&2; exit 2; fi
img=$1 mode=$2 delay=${3:-}
[ -f "$img" ] || { echo "set-mode: no image $img" >&2; exit 1; }
case "$mode" in
normal | ignore-acpi | poweroff | panic | flood | default) ;;
*) echo "set-mode: MODE must be normal, ignore-acpi, poweroff, panic, flood or default, not '$mode'" >&2; exit 2 ;;
esac
case "$delay" in '' | *[!0-9]*) [ -z "$delay" ] || { echo "set-mode: DELAY must be a whole number of seconds" >&2; exit 2; } ;; esac
export MTOOLS_SKIP_CHECK=1
if [ "$mode" = default ]; then
	mdel -i "$img" ::mode 2>/dev/null || true
	exit 0
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "$mode${delay:+ $delay}" > "$tmp"
mcopy -o -i "$img" "$tmp" ::mode
