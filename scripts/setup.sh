#!/usr/bin/env bash
# `npm run setup`: everything a fresh Debian machine needs, then the build, then the main job (the demo).
#   --ci        install and build only; the caller runs the tests
#   --no-demo   skip the demonstration at the end
# Each long step runs through build/progress.mjs: on a terminal one line that updates with what it is doing,
# off one a plain line a step; its whole output is kept in dist/setup/<step>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=dist/setup
mkdir -p "$logs"
# `step NAME [--steps REGEX] -- COMMAND...`: COMMAND with its progress said, its output in $logs/NAME.log
step() {
  local name=$1
  shift
  node build/progress.mjs --prefix setup --log "$logs/$name.log" --name "$name" "$@" ||
    { echo "setup: $name failed; its output is in $logs/$name.log" >&2; tail -n 20 "$logs/$name.log" >&2; exit 1; }
}

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
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  step apt-update -- $sudo apt-get update
  step apt-install --steps '^(Unpacking|Setting up) ' -- \
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

if [ -f package-lock.json ]; then
  step npm-ci -- npm ci --no-audit --no-fund
else
  step npm-install -- npm install --no-audit --no-fund
fi

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
