#!/usr/bin/env bash
# `npm run test:container`: the container image built from the project's Dockerfile and run for real
# (test/container/image.test.ts), on a machine that may have no Docker engine and reaches no image registry.
#
#   1. a Docker engine: the one that answers, or Debian's docker.io installed and started (scripts/docker-engine.sh),
#      stopped again at the end when this run started it;
#   2. the base image, made locally (scripts/container-base-image.sh: debootstrap bookworm + Node 20 + npm), or found
#      from an earlier run on this machine;
#   3. vitest's `container` project: builds the Dockerfile unchanged through its NODE_IMAGE argument and runs the
#      image against the local RabbitMQ, ActiveMQ and Redis (found or started as for `npm test`).
# Prints each step's time, and exits with the tests' status. Needs root when it has to install or start anything.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '\n=== [%4ds] test:container: %s\n' "$SECONDS" "$*"; }

engine_started=0
cleanup() {
  local rc=$?
  trap - EXIT
  if ((engine_started)); then
    step "stop the Docker engine this run started"
    bash scripts/docker-engine.sh stop || echo "test:container: warning: stopping dockerd failed" >&2
  fi
  step "done: exit $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "a Docker engine"
if ! docker info >/dev/null 2>&1; then engine_started=1; fi
bash scripts/docker-engine.sh start

step "the base image (Debian bookworm, Node 20, npm; made here, no registry)"
base="$(bash scripts/container-base-image.sh | tail -n 1)"
echo "test:container: base image $base"

step "build the image from the Dockerfile and run it against the local brokers"
CONTAINER_NODE_IMAGE="$base" npx vitest run --project container
