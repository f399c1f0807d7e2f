# Shared helpers of the kvnode test guest, sourced by /init, the udhcpc script and the ACPI
# power-button handler (busybox ash). State lives in /run/kvnode/.

KV_STATE=/run/kvnode

# say LINE...: one marker line on the serial console (one write(), so lines do not interleave).
say() {
	echo "$*" > /dev/console
}

kv_get() { # kv_get NAME [DEFAULT]
	if [ -r "$KV_STATE/$1" ]; then cat "$KV_STATE/$1"; else echo "${2:-}"; fi
}

kv_set() { # kv_set NAME VALUE
	echo "$2" > "$KV_STATE/$1.tmp" && mv -f "$KV_STATE/$1.tmp" "$KV_STATE/$1"
}

# write_pages: (re)writes the pages busybox httpd serves on port 80 and 8080, from the current
# boot id and hostname. Called at boot and whenever the hostname changes.
write_pages() {
	_id=$(kv_get boot_id)
	_hn=$(hostname)
	for _p in 80 8080; do
		mkdir -p "/www/$_p"
		printf 'kvnode-guest boot_id=%s hostname=%s\nport=%s\n' "$_id" "$_hn" "$_p" \
			> "/www/$_p/index.html.tmp"
		mv -f "/www/$_p/index.html.tmp" "/www/$_p/index.html"
	done
}

# set_hostname NAME SOURCE: sets the hostname unless a source of higher precedence already did
# (cloud-init local-hostname beats DHCP, which beats the built-in default).
set_hostname() {
	case "$(kv_get hostname_source default)/$2" in
	cidata/dhcp) return 0 ;;
	esac
	hostname "$1" 2>/dev/null || return 0
	kv_set hostname_source "$2"
	write_pages
	say "KVNODE-GUEST-HOSTNAME $1 source=$2"
}

# kv_poweroff REASON: clean power-off (ACPI S5, so QEMU exits). Nothing is mounted read-write
# (the data disk is raw and written synchronously), so a sync is all the cleaning up there is.
kv_poweroff() {
	say "KVNODE-GUEST-POWEROFF reason=$1"
	sync
	poweroff -f
}
