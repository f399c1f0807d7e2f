#!/bin/sh
# udhcpc event script of the kvnode test guest: configures address, MTU, router, DNS and
# hostname, and prints "KVNODE-GUEST-IP <iface> <address>" when an address is bound or changes.
# udhcpc passes: $1 = deconfig|bound|renew|leasefail|nak, and $interface $ip $mask $subnet
# $broadcast $router $staticroutes $dns $domain $search $hostname $mtu $lease in the environment.
. /etc/kvnode/lib.sh

add_static_routes() {
	while [ $# -ge 2 ]; do
		if [ "$1" != 0.0.0.0/0 ]; then
			ip route replace "$1" via "$2" dev "$interface" 2>/dev/null
		fi
		shift 2
	done
}

case "$1" in
deconfig)
	ip -4 addr flush dev "$interface" 2>/dev/null
	ip link set "$interface" up
	rm -f "$KV_STATE/ip.$interface"
	;;
bound | renew)
	old=$(kv_get "ip.$interface")
	if [ "$1" = bound ] || [ "$old" != "$ip" ]; then
		ip -4 addr flush dev "$interface"
		ip addr add "$ip/${mask:-24}" ${broadcast:+broadcast "$broadcast"} dev "$interface"
	fi
	[ -n "$mtu" ] && ip link set "$interface" mtu "$mtu"
	# Classless static routes (option 121): "dest/len gateway" pairs; a default route among
	# them is left to the router rule below.
	add_static_routes $staticroutes
	if [ -n "$router" ]; then
		gw=${router%% *}
		# eth0 owns the default route; another NIC gets one only if there is none yet.
		if [ "$interface" = eth0 ] || ! ip route show default | grep -q .; then
			ip route replace default via "$gw" dev "$interface" 2>/dev/null || {
				# a router outside the subnet (e.g. a /32 lease): reach it on-link first
				ip route replace "$gw" dev "$interface" scope link
				ip route replace default via "$gw" dev "$interface"
			}
		fi
	fi
	if [ -n "$dns" ] && { [ "$interface" = eth0 ] || [ ! -s /etc/resolv.conf ]; }; then
		{
			[ -n "$search" ] && echo "search $search"
			[ -z "$search" ] && [ -n "$domain" ] && echo "search $domain"
			for s in $dns; do echo "nameserver $s"; done
		} > /etc/resolv.conf.tmp
		mv -f /etc/resolv.conf.tmp /etc/resolv.conf
	fi
	[ -n "$hostname" ] && [ "$hostname" != "$(hostname)" ] && set_hostname "$hostname" dhcp
	if [ "$old" != "$ip" ]; then
		kv_set "ip.$interface" "$ip"
		say "KVNODE-GUEST-IP $interface $ip${mtu:+ mtu=$mtu}${router:+ router=${router%% *}}"
		# The DNS the lease carries (DHCP options 6 and 119), as the guest's resolv.conf has it.
		say "KVNODE-GUEST-DNS $interface nameservers=$dns search=$search"
	fi
	;;
esac
exit 0
