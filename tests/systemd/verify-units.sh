#!/usr/bin/env bash
# verify-units.sh BINDIR — `systemd-analyze verify` on systemd/kvnode-handler.service, with its
# /usr/local/bin paths pointed at BINDIR (verify checks that ExecStart binaries exist), and
# syntax checks of the sysusers and tmpfiles configs. Exits non-zero on any finding.
set -euo pipefail
bindir=$(cd "${1:?usage: $0 BINDIR}" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/local/bin/|$bindir/|g" "$src/systemd/kvnode-handler.service" > "$tmp/kvnode-handler.service"
out=$(systemd-analyze verify --man=no "$tmp/kvnode-handler.service" 2>&1) || {
	echo "$out"
	exit 1
}
# verify prints warnings without failing; any line about our unit is a finding.
if grep -q "kvnode-handler.service" <<<"$out"; then
	echo "$out"
	exit 1
fi
systemd-sysusers --dry-run "$src/systemd/kvnode.sysusers.conf" > "$tmp/sysusers.out" 2>&1 || {
	cat "$tmp/sysusers.out"
	exit 1
}
# tmpfiles has no dry run: create into a scratch root and look at the result.
mkdir -p "$tmp/root"
systemd-tmpfiles --root="$tmp/root" --create "$src/systemd/kvnode.tmpfiles.conf" > "$tmp/tmpfiles.out" 2>&1 || {
	cat "$tmp/tmpfiles.out"
	exit 1
}
[ "$(stat -c %a "$tmp/root/var/lib/kvnode")" = 711 ] || { echo "tmpfiles: /var/lib/kvnode is not 0711"; exit 1; }
[ -d "$tmp/root/run/kvnode" ] || { echo "tmpfiles: /run/kvnode missing"; exit 1; }
echo "systemd units verified"
