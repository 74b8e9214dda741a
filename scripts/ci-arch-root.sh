#!/bin/sh
# Build the Debian root the systemd tests boot as a container, once, into a cached tarball.
# Usage: ci-arch-root.sh TARBALL [MIRROR]
# Idempotent and safe to run concurrently: the build holds a lock and the tarball is renamed into place,
# so nobody ever finds half of one. ~40 s the first time; nothing after.
set -eu
tarball=$1
mirror=${2:-}
if [ -z "$mirror" ]; then
  # the mirror this machine's apt already uses (deb822), else the public one
  mirror=$(awk '/^URIs:/ { u = $2 } /^Suites:.*bookworm( |$)/ && u { print u; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
[ -e "$tarball" ] && exit 0
cache=$(dirname "$tarball")
mkdir -p "$cache"
exec 9>>"$cache/.build.lock"
flock 9
[ -e "$tarball" ] && exit 0
build=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$build"' EXIT
if ! debootstrap --variant=minbase --include=systemd,dbus bookworm "$build/root" "$mirror" >"$build/log" 2>&1; then
  tail -20 "$build/log" >&2
  exit 1
fi
echo mesh-test >"$build/root/etc/hostname"
: >"$build/root/etc/machine-id"
# timers nothing in the tests needs: they only make the boot longer and the journal noisier
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$build/root/etc/systemd/system/$unit"
done
tar -C "$build/root" -cf - . | gzip -1 >"$build/root.tar.gz"
mv "$build/root.tar.gz" "$tarball"
