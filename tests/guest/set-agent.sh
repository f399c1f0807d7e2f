#!/usr/bin/env bash
# set-agent.sh IMAGE on|off — whether the kvnode test guest starts its QEMU guest agent (file
# "agent" on the FAT boot filesystem, rewritten with mtools). "off": a guest without an agent,
# as one that has none installed (the domain's channel stays unconnected).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 IMAGE on|off" >&2; exit 2; }
img=$1 state=$2
[ -f "$img" ] || { echo "set-agent: no image $img" >&2; exit 1; }
case "$state" in
on | off) ;;
*) echo "set-agent: state must be on or off, not '$state'" >&2; exit 2 ;;
esac
export MTOOLS_SKIP_CHECK=1
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "$state" > "$tmp"
mcopy -o -i "$img" "$tmp" ::agent
