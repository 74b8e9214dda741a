#!/usr/bin/env bash
# `npm run setup`: everything a fresh Debian machine needs, then the build, then the main job (the demo).
#   --ci        install and build only; the caller runs the tests
#   --no-demo   skip the demonstration at the end
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0 demo=1
for arg in "$@"; do
  case "$arg" in
    --ci) ci=1 demo=0 ;;
    --no-demo) demo=0 ;;
    *) echo "setup: unknown flag $arg" >&2; exit 2 ;;
  esac
done

DEBIAN_PACKAGES=(nats-server makepkg pacman-package-manager libarchive-tools zstd fakeroot systemd mksh dash openssl
  util-linux binutils binutils-aarch64-linux-gnu procps iproute2 debootstrap systemd-container
  qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross)

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi

if [ -f build/build.mjs ]; then npm run --silent build; fi

# the Arch appliers' tests boot a real systemd in a container of a Debian root: made once, cached
if [ "$ci" -eq 1 ] && [ -f scripts/ci-arch-setup.sh ]; then sh scripts/ci-arch-setup.sh; fi
# docker.io and podman for the container appliers' tests (the tests start their own daemons)
if [ "$ci" -eq 1 ] && [ -f scripts/ci-containers-setup.sh ]; then sh scripts/ci-containers-setup.sh; fi
# wireguard-tools and wireguard-go for the overlay's tests (network namespaces, no kernel module)
if [ "$ci" -eq 1 ] && [ -f scripts/ci-overlay-setup.sh ]; then sh scripts/ci-overlay-setup.sh; fi

if [ "$demo" -eq 1 ]; then
  npm run --silent demo
fi
