#!/bin/sh
# What the Arch host's tests need on a Debian 12 CI machine (run as root), idempotent:
#  - systemd-nspawn and debootstrap, to boot a real systemd as PID 1 of a container (test/support/systemd.ts);
#  - makepkg, pacman, repo-add and their tools, for real packages in a throwaway root (test/support/pacman.ts);
#  - the container's root, built once into a cached tarball (MESH_HOST_TEST_CACHE, /var/cache/mesh-host-test).
set -eu
packages="debootstrap systemd-container makepkg pacman-package-manager libarchive-tools zstd fakeroot util-linux procps"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  apt-get install -y --no-install-recommends $missing || { apt-get update && apt-get install -y --no-install-recommends $missing; }
fi
cache=${MESH_HOST_TEST_CACHE:-/var/cache/mesh-host-test}
root_format=bookworm-1 # keep equal to ROOT_FORMAT in test/support/systemd.ts
exec "$(dirname "$0")/ci-arch-root.sh" "$cache/debian-root-$root_format.tar.gz"
