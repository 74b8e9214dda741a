# Sourced by the ci-*-setup.sh scripts (POSIX sh, as root): install what of a list of Debian packages is not
# installed yet, without recommends, asking for fresh package lists only when the cached ones fail.

# missing_packages P...: the ones dpkg does not have installed, space separated (empty when none)
missing_packages() {
  mp_missing=""
  for mp_p in "$@"; do
    dpkg-query -W -f='${Status}' "$mp_p" 2>/dev/null | grep -q "install ok installed" || mp_missing="$mp_missing $mp_p"
  done
  printf '%s' "$mp_missing"
}

# apt_install P...: apt-get install them, with no recommends
apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" ||
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; }
}
