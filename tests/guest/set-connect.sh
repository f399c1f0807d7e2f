#!/usr/bin/env bash
# set-connect.sh IMAGE HOST:PORT|none — makes the kvnode test guest open a TCP connection to
# HOST:PORT once eth0 has an address and send "kvnode-guest boot_id=<id>\n" (file "connect" on
# the FAT boot filesystem, rewritten with mtools; it wins over kvnode.connect= on the kernel
# command line). "none" disables it. HOST should be an IPv4 address.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 IMAGE HOST:PORT|none" >&2; exit 2; }
img=$1 target=$2
[ -f "$img" ] || { echo "set-connect: no image $img" >&2; exit 1; }
case "$target" in
none | ?*:[0-9]*) ;;
*) echo "set-connect: target must be HOST:PORT or none, not '$target'" >&2; exit 2 ;;
esac
export MTOOLS_SKIP_CHECK=1
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "$target" > "$tmp"
mcopy -o -i "$img" "$tmp" ::connect
