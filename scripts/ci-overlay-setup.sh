#!/bin/sh
# What the overlay's tests need on a Debian 12 machine (run as root), idempotent (overlay.md, "Testing here"):
#  - wg and wg-quick, and wireguard-go: there is no WireGuard kernel module here, and wg-quick falls back to it;
#  - ip (network namespaces, veth pairs), nsenter and unshare, and ping for traffic inside the namespaces;
#  - systemd-nspawn and debootstrap, for the one test machine with systemd as PID 1 (test/support/wireguard.ts
#    boots the Arch appliers' cached Debian root with a private network and copies these tools into it).
# --no-install-recommends: wireguard-tools would otherwise ask for a kernel module that cannot load here.
set -eu
packages="wireguard-tools wireguard-go iproute2 iputils-ping util-linux systemd-container debootstrap"
# shellcheck source=scripts/apt-missing.sh
. "$(dirname "$0")/apt-missing.sh"
# shellcheck disable=SC2086
missing=$(missing_packages $packages)
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  apt_install $missing
fi
# the mount points each test machine's private /run/wireguard and /etc/wireguard go over
mkdir -p /run/wireguard /etc/wireguard
