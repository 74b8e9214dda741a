#!/bin/sh
# What the Arch host's tests need on a Debian 12 CI machine (run as root), idempotent:
#  - systemd-nspawn and debootstrap, to boot a real systemd as PID 1 of a container (test/support/systemd.ts);
#  - makepkg, pacman, repo-add and their tools, for real packages in a throwaway root (test/support/pacman.ts);
#  - the container's root, built once into a cached tarball (MESH_HOST_TEST_CACHE, /var/cache/mesh-host-test).
set -eu
packages="debootstrap systemd-container makepkg pacman-package-manager libarchive-tools zstd fakeroot util-linux procps"
# shellcheck source=scripts/apt-missing.sh
. "$(dirname "$0")/apt-missing.sh"
# shellcheck disable=SC2086
missing=$(missing_packages $packages)
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  apt_install $missing
fi
cache=${MESH_HOST_TEST_CACHE:-/var/cache/mesh-host-test}
root_format=bookworm-1 # keep equal to ROOT_FORMAT in test/support/systemd.ts
exec "$(dirname "$0")/ci-arch-root.sh" "$cache/debian-root-$root_format.tar.gz"
