#!/usr/bin/env bash
# `npm run package [-- --arch x64|arm64]`: dist/mesh-host-<pkgver>-<pkgrel>-<carch>.pkg.tar.zst from the
# executable `npm run build` made (it does not rebuild it: run the build first).
#
# Environment: MESH_PKGVER (default: package.json's version, "-" made "_"), MESH_PKGREL (default 1),
# MESH_PKGDEST (default dist/), MESH_PKGWORK (the staging directory, default dist/.pkgbuild/<arch>; it is
# recorded in .BUILDINFO, so two builds are byte-identical only from the same one), SOURCE_DATE_EPOCH
# (default: the last commit's time), MESH_EXE (default dist/mesh-host-<version>-linux-<arch>), MESH_PKGZST
# (zstd's level flags, default "-19 -T0"; the package tests give "-3": the level changes the size, nothing else).
#
# makepkg refuses root: as root it runs in a user namespace mapped to uid 1000 (packaging.md). Debian's
# makepkg.conf is sourced, then overridden by a config of our own (zst, sha256, no check, no user config).
set -euo pipefail
started=$(date +%s%N)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

# A result is a plain line on stdout; a step is a progress line on stderr: on a terminal one line that updates
# (cleared before the next result), off one a plain line. makepkg's own steps come through build/progress.mjs.
step() {
  if [ -t 2 ]; then printf '\r\033[K%s' "package: $*" >&2; else printf 'package: %s\n' "$*" >&2; fi
}
unstep() { if [ -t 2 ]; then printf '\r\033[K' >&2; fi; }
say() {
  unstep
  printf 'package: %s\n' "$*"
}
fail() {
  unstep
  printf 'package: %s\n' "$*" >&2
  exit 1
}

arch=
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=${2:-}; shift 2 ;;
    --arch=*) arch=${1#--arch=}; shift ;;
    *) fail "unknown flag \"$1\" (flags: --arch x64|arm64)" ;;
  esac
done
if [ -z "$arch" ]; then
  case $(uname -m) in x86_64) arch=x64 ;; aarch64 | arm64) arch=arm64 ;; *) fail "unknown machine $(uname -m): give --arch" ;; esac
fi
case $arch in x64) carch=x86_64 ;; arm64) carch=aarch64 ;; *) fail "--arch must be x64 or arm64, not \"$arch\"" ;; esac

for tool in makepkg fakeroot bsdtar zstd; do
  command -v "$tool" >/dev/null || fail "$tool is missing (Debian: apt-get install makepkg pacman-package-manager libarchive-tools zstd fakeroot)"
done

version=$(sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$root/package.json" | head -n1)
[ -n "$version" ] || fail "no version in package.json"
pkgver=${MESH_PKGVER:-${version//-/_}}
pkgrel=${MESH_PKGREL:-1}
exe=${MESH_EXE:-$root/dist/mesh-host-$version-linux-$arch}
[ -f "$exe" ] || fail "$exe is missing: npm run build -- --arch $arch first"
dest=${MESH_PKGDEST:-$root/dist}
work=${MESH_PKGWORK:-$root/dist/.pkgbuild/$arch}
# Measured 2026-12-03 on the 105 MiB x64 executable: zstd's default (-3) 37.0 MiB; -19 28.9 MiB, decompressed
# (installed) in 0.28 s of CPU against 0.19 s, in 12 MiB; -19 --long 28.7 MiB but a 128 MiB window to
# decompress. -19 it is. Its output is the same for any number of threads, so -T0 keeps builds byte-identical.
zst=${MESH_PKGZST:--19 -T0}
case $zst in *[!-0-9A-Za-z=\ ]*) fail "MESH_PKGZST takes zstd flags only, not \"$zst\"" ;; esac
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

# The staging directory is emptied first: the default one, or one this script made (it leaves a marker), never
# another a mistaken MESH_PKGWORK names.
if [ -n "${MESH_PKGWORK:-}" ] && [ -e "$work" ] && [ ! -e "$work/.mesh-host-pkgwork" ] && [ -n "$(ls -A "$work" 2>/dev/null)" ]; then
  fail "$work is not empty and is not a staging directory of this script: not emptying it"
fi
step "staging $(basename "$exe") and its files in $work"
rm -rf "$work"
mkdir -p "$work/db" "$work/src" "$work/build" "$work/home" "$dest"
: >"$work/.mesh-host-pkgwork"
cp "$here/PKGBUILD" "$here/mesh-host.service" "$here/launch" "$root/LICENSE" "$work/"
ln -f "$exe" "$work/mesh-host" 2>/dev/null || cp "$exe" "$work/mesh-host"
# the man page and completions npm run build made from the command table (build/docs.mjs)
docs=${MESH_DOCS:-$root/dist}
for doc in mesh-host.1 mesh-host-mesh.1 completions/mesh-host.bash completions/_mesh-host; do
  [ -f "$docs/$doc" ] || fail "$docs/$doc is missing: npm run build first"
  cp "$docs/$doc" "$work/"
done
sum() { sha256sum "$1" | cut -d' ' -f1; }

# makepkg asks pacman only for the list of installed packages (.BUILDINFO): an empty database of its own keeps
# that list empty (the same on every machine) and keeps Debian's "failed to initialize alpm library" quiet.
cat >"$work/pacman" <<WRAP
#!/bin/sh
exec pacman --dbpath "$work/db" "\$@"
WRAP
chmod 755 "$work/pacman"
cat >"$work/makepkg.conf" <<CONF
[ -r /etc/makepkg.conf ] && source /etc/makepkg.conf
CARCH=$carch
PKGEXT='.pkg.tar.zst'
COMPRESSZST=(zstd -c -z -q $zst -)
INTEGRITY_CHECK=(sha256)
BUILDENV=(!distcc !color !ccache !check !sign)
OPTIONS=(!strip !docs !libtool !staticlibs emptydirs !zipman !purge !debug !lto)
PACKAGER='mesh-host build <mesh-host@localhost>'
CONF

as_builder=()
if [ "$(id -u)" = 0 ]; then
  # Everything under $work and $dest is root's, which the namespace maps to the builder.
  as_builder=(unshare --user --map-user=1000 --map-group=1000)
fi
log=$work/makepkg.log
step "makepkg: packing with zstd $zst (the longest step: about 2 minutes at -19)"
if ! (cd "$work" && node "$root/build/progress.mjs" --prefix package --log "$log" --name makepkg --steps '^==> ' -- env -i PATH="$PATH" HOME="$work/home" XDG_CONFIG_HOME="$work/home" LANG=C.UTF-8 \
  SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" PKGDEST="$dest" SRCDEST="$work/src" BUILDDIR="$work/build" \
  PKGEXT=.pkg.tar.zst CARCH="$carch" PACMAN="$work/pacman" \
  MESH_PKGVER="$pkgver" MESH_PKGREL="$pkgrel" MESH_SHA256_BIN="$(sum "$work/mesh-host")" \
  MESH_SHA256_UNIT="$(sum "$work/mesh-host.service")" MESH_SHA256_LAUNCH="$(sum "$work/launch")" MESH_SHA256_LICENSE="$(sum "$work/LICENSE")" \
  MESH_SHA256_MAN="$(sum "$work/mesh-host.1")" MESH_SHA256_MESHMAN="$(sum "$work/mesh-host-mesh.1")" MESH_SHA256_BASH="$(sum "$work/mesh-host.bash")" MESH_SHA256_ZSH="$(sum "$work/_mesh-host")" \
  "${as_builder[@]}" makepkg --config "$work/makepkg.conf" --force --nodeps --noconfirm --nocolor \
  --noprogressbar); then
  cat "$log" >&2
  fail "makepkg failed (log: $log)"
fi
out=$dest/mesh-host-$pkgver-$pkgrel-$carch.pkg.tar.zst
[ -f "$out" ] || fail "makepkg made no $out (log: $log)"
size=$(stat -c %s "$out")
ms=$((($(date +%s%N) - started) / 1000000))
say "$out $(awk -v s="$size" 'BEGIN { printf "%.1f MiB", s / 1048576 }') in $ms ms (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)"
