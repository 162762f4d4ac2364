# Sourced by scripts that install a Debian package on a machine that lacks it (root, as on CI): `apt_install PKG...`
# installs quietly without recommends, refreshing the package lists only when they are missing (a fresh machine) or
# when the install fails with the old ones. The sourcing script defines `log`.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  log "installing Debian's $* (apt-get)"
  if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then apt-get update -qq; fi
  if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  fi
}
