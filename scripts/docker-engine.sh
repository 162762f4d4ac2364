#!/usr/bin/env bash
# A Docker engine for `npm run test:container` (scripts/container-test.sh) on a machine that has none: Debian's
# docker.io (installed when dockerd is missing) started as root with `dockerd --iptables=false --bridge=none` (no
# network setup on the host: containers and builds use --network host).
#
#   scripts/docker-engine.sh start   # an engine that already answers is used as it is ("found"); else one is started
#   scripts/docker-engine.sh stop    # stops only the dockerd this script started (its pid file); nothing else
#
# State (pid file, dockerd's log) in .container-test/ at the repo root (gitignored; override with
# CONTAINER_TEST_DIR). Images stay in dockerd's own store (/var/lib/docker), so the next run on this machine finds the
# base image it made (scripts/container-base-image.sh).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_DIR="${CONTAINER_TEST_DIR:-$REPO_DIR/.container-test}"
PID_FILE="$STATE_DIR/dockerd.pid"
LOG_FILE="$STATE_DIR/dockerd.log"
START_TIMEOUT="${DOCKERD_START_TIMEOUT:-60}"

log() { echo "docker-engine: $*"; }
die() { echo "docker-engine: $*" >&2; exit 1; }
# shellcheck source=apt-install.inc.sh
source "$SCRIPT_DIR/apt-install.inc.sh"

answers() { docker info >/dev/null 2>&1; }

running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

do_start() {
  if answers; then
    log "found: a Docker engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?')); it is left as it is"
    return 0
  fi
  [[ "$(id -u)" == 0 ]] || die "no Docker engine answers, and starting one needs root"
  command -v dockerd >/dev/null || apt_install docker.io
  command -v dockerd >/dev/null || die "dockerd is not on PATH after installing docker.io"
  command -v docker >/dev/null || die "the docker client is not on PATH after installing docker.io"
  mkdir -p "$STATE_DIR"
  local t0=$SECONDS
  # setsid: its own session, so that a Ctrl-C of the caller's terminal goes to the caller, whose trap stops it.
  setsid dockerd --iptables=false --bridge=none --pidfile "$PID_FILE" >"$LOG_FILE" 2>&1 </dev/null &
  local deadline=$((SECONDS + START_TIMEOUT))
  until answers; do
    if ((SECONDS >= deadline)); then
      tail -n 30 "$LOG_FILE" >&2 || true
      die "dockerd did not answer within ${START_TIMEOUT}s (its log: $LOG_FILE)"
    fi
    sleep 0.5
  done
  log "started: dockerd $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?') (pid $(cat "$PID_FILE"); ready in $((SECONDS - t0))s; log $LOG_FILE)"
}

do_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    log "not started by this script: nothing to stop"
    return 0
  fi
  kill -TERM "$pid"
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "dockerd (pid $pid) did not stop within 30s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  fi
  rm -f "$PID_FILE"
  log "stopped dockerd (pid $pid)"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
