#!/bin/sh
# What the container tests need on a Debian 12 machine (run as root), idempotent (containers.md, "Testing here"):
#  - dockerd from Debian's docker.io, started by the tests with their own roots and socket (test/support/runtimes.ts);
#  - podman 4.3 with runc, netavark and aardvark-dns for its networks;
#  - busybox-static: the one binary every test image is made of (no registry is reachable).
set -eu
packages="docker.io containerd runc tini iptables podman conmon netavark aardvark-dns catatonit uidmap busybox-static"
# shellcheck source=scripts/apt-missing.sh
. "$(dirname "$0")/apt-missing.sh"
# shellcheck disable=SC2086
missing=$(missing_packages $packages)
if [ -n "$missing" ]; then
  # the packages' own services are not wanted: the tests start each daemon with its own roots
  policy=/usr/sbin/policy-rc.d
  made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
  fi
  # shellcheck disable=SC2086
  apt_install $missing
  [ -z "$made_policy" ] || rm -f "$policy"
fi
