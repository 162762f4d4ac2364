#!/usr/bin/env bash
# Runs the project's own Redis Sentinel setup (Debian's redis-server 7.0, `redis-server sentinel.conf --sentinel`):
# a master on 127.0.0.1:6380, a replica on 6381, and 3 sentinels on 26379–26381 watching them as `mymaster`
# (quorum 2, down-after-milliseconds 1000, failover-timeout 5000), for tests, CI (.ci/run) and the fault suite
# (--redis sentinel).
#
#   scripts/redis-sentinel.sh start|stop|status|restart
#   scripts/redis-sentinel.sh start-node PORT   # (re)starts one data node (6380/6381) from its own config file: an old
#                                               # master that comes back is turned into a replica by the sentinels
#
# Idempotent: `start` on a healthy setup (both data nodes and the 3 sentinels answer, the sentinels agree on the
# master, each knows the replica and the 2 other sentinels) does nothing — whichever node is master then; otherwise
# it stops this instance's processes, wipes their directories and starts afresh from fresh config files (a sentinel
# rewrites its config file, so an old one would carry the last run's state). After a failover the master may be
# 6381: `status` says which.
# State lives in .redis-local/sentinel/ at the repo root (gitignored; override with REDIS_LOCAL_DIR); ports with
# REDIS_SENTINEL_DATA_PORT (the master's, default 6380; the replica's is the next) and REDIS_SENTINEL_PORT (the first
# sentinel's, default 26379; the other two are the next). A port taken by a process that is not this instance's is
# never touched while its folder exists: `start` then fails with a sentence naming it. One whose folder is gone (an
# orphan: its checkout was removed with the setup running) is stopped and replaced.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_DIR="${REDIS_LOCAL_DIR:-$REPO_DIR/.redis-local}/sentinel"
HOST=127.0.0.1
NAME="${REDIS_SENTINEL_NAME:-mymaster}"
MASTER_PORT="${REDIS_SENTINEL_DATA_PORT:-6380}"
REPLICA_PORT=$((MASTER_PORT + 1))
DATA_PORTS=("$MASTER_PORT" "$REPLICA_PORT")
SENTINEL_BASE_PORT="${REDIS_SENTINEL_PORT:-26379}"
SENTINEL_PORTS=("$SENTINEL_BASE_PORT" $((SENTINEL_BASE_PORT + 1)) $((SENTINEL_BASE_PORT + 2)))
START_TIMEOUT="${REDIS_SENTINEL_START_TIMEOUT:-30}"

TAG=redis-sentinel
# shellcheck source=redis-local.inc.sh
source "$SCRIPT_DIR/redis-local.inc.sh"

all_ports() { echo "${DATA_PORTS[@]}" "${SENTINEL_PORTS[@]}"; }

# True when the process answering on the port was started from this instance's directory (its config file is
# there); a sentinel refuses CONFIG GET, INFO server names the config file for both kinds.
ours() {
  local conf theirs mine
  conf="$(cli "$1" info server | tr -d '\r' | sed -n 's/^config_file://p')"
  # Both folders must exist: two that do not would compare equal (an orphan's, and ours before its first start).
  theirs="$(cd "$(dirname "$conf")" 2>/dev/null && pwd -P)" || return 1
  mine="$(cd "$(node_dir "$1")" 2>/dev/null && pwd -P)" || return 1
  [[ -n "$conf" && "$theirs" == "$mine" ]]
}

# The master's port as sentinel $1 sees it, or nothing.
master_of() { cli "$1" sentinel get-master-addr-by-name "$NAME" | sed -n 2p; }

# A field of `SENTINEL MASTER <name>` on sentinel $1.
master_field() { cli "$1" sentinel master "$NAME" | awk -v k="$2" 'NR % 2 == 1 && $0 == k { getline; print; exit }'; }

# Healthy: both data nodes answer; all sentinels name the same master, which says role:master; each sentinel knows the
# replica and the other sentinels (a failover needs a majority of sentinels that know each other).
healthy() {
  local p m="" seen
  for p in "${DATA_PORTS[@]}"; do pings "$p" || return 1; done
  for p in "${SENTINEL_PORTS[@]}"; do
    seen="$(master_of "$p")"
    [[ -n "$seen" ]] || return 1
    [[ -z "$m" || "$m" == "$seen" ]] || return 1
    m="$seen"
    [[ "$(master_field "$p" num-slaves)" == 1 ]] || return 1
    [[ "$(master_field "$p" num-other-sentinels)" == 2 ]] || return 1
    [[ "$(master_field "$p" flags)" == master ]] || return 1
  done
  [[ "$(cli "$m" role | head -1)" == master ]] || return 1
  # The replica has finished its sync (a replica still loading would answer LOADING to reads).
  local r
  for r in "${DATA_PORTS[@]}"; do
    [[ "$r" == "$m" ]] && continue
    [[ "$(cli "$r" info replication | tr -d '\r' | sed -n 's/^master_link_status://p')" == up ]] || return 1
  done
}

write_data_conf() {
  local port="$1" dir
  dir="$(node_dir "$port")"
  mkdir -p "$dir"
  {
    echo "port $port"
    echo "bind $HOST"
    echo "protected-mode no"
    echo "dir $dir"
    echo "appendonly yes"
    echo "appendfsync everysec"
    echo 'save ""'
    echo "daemonize yes"
    echo "pidfile $dir/redis.pid"
    echo "logfile $dir/redis.log"
    if [[ "$port" != "$MASTER_PORT" ]]; then echo "replicaof $HOST $MASTER_PORT"; fi
  } >"$dir/redis.conf"
}

write_sentinel_conf() {
  local port="$1" dir
  dir="$(node_dir "$port")"
  mkdir -p "$dir"
  {
    echo "port $port"
    echo "bind $HOST"
    echo "protected-mode no"
    echo "dir $dir"
    echo "daemonize yes"
    echo "pidfile $dir/redis.pid"
    echo "logfile $dir/sentinel.log"
    echo "sentinel monitor $NAME $HOST $MASTER_PORT 2"
    echo "sentinel down-after-milliseconds $NAME 1000"
    echo "sentinel failover-timeout $NAME 5000"
    echo "sentinel parallel-syncs $NAME 1"
  } >"$dir/sentinel.conf"
}

print_status() {
  local p m=""
  for p in "${SENTINEL_PORTS[@]}"; do
    if pings "$p"; then
      echo "  sentinel $HOST:$p: master of '$NAME' is $(master_of "$p" || echo '?') ($(master_field "$p" num-slaves) replica(s), $(master_field "$p" num-other-sentinels) other sentinel(s), flags $(master_field "$p" flags))"
      [[ -n "$m" ]] || m="$(master_of "$p")"
    else
      echo "  sentinel $HOST:$p: down"
    fi
  done
  for p in "${DATA_PORTS[@]}"; do
    if pings "$p"; then
      echo "  redis $HOST:$p: $(cli "$p" role | head -1)$([[ "$p" == "$m" ]] && echo ' (the master the sentinels name)')"
    else
      echo "  redis $HOST:$p: down"
    fi
  done
  [[ -z "$m" ]] || log "master: $HOST:$m"
}

do_start() {
  local p orphans=0
  if healthy; then
    # Another checkout's setup on these ports would pass for ours, and the tests' kill/restart helpers, which work on
    # this instance's directory, would then fail in ways that say nothing.
    for p in $(all_ports); do
      if ours "$p"; then continue; fi
      if orphaned "$p"; then orphans=1; continue; fi
      die "the healthy Redis Sentinel setup on these ports is not this instance's: port $p was started from $(owner_dir "$p" "$(cli "$p" info server | tr -d '\r' | sed -n 's/^config_file://p')"), not from $STATE_DIR; stop it with the scripts/redis-sentinel.sh of that checkout first"
    done
    if ((orphans == 0)); then
      log "already running: master $HOST:$(master_of "${SENTINEL_PORTS[0]}"), sentinels on ${SENTINEL_PORTS[*]}"
      return 0
    fi
  fi
  for p in $(all_ports); do
    if port_open "$p" && ! running_pid "$p" >/dev/null && ! ours "$p"; then
      if orphaned "$p"; then
        log "port $p: a process left by a removed checkout (it worked in $(owner_dir "$p")); stopping it"
        continue
      fi
      die "port $p is taken by a process that is not this instance's: it was started from $(owner_dir "$p" "$(cli "$p" info server | tr -d '\r' | sed -n 's/^config_file://p')"), not from $STATE_DIR; stop it first"
    fi
  done
  local t0=$SECONDS
  for p in $(all_ports); do stop_port "$p"; done
  rm -rf "$STATE_DIR"
  for p in "${DATA_PORTS[@]}"; do write_data_conf "$p"; redis-server "$(node_dir "$p")/redis.conf"; done
  for p in "${DATA_PORTS[@]}"; do wait_ping "$p"; done
  for p in "${SENTINEL_PORTS[@]}"; do write_sentinel_conf "$p"; redis-server "$(node_dir "$p")/sentinel.conf" --sentinel; done
  for p in "${SENTINEL_PORTS[@]}"; do wait_ping "$p"; done
  local deadline=$((SECONDS + START_TIMEOUT))
  until healthy; do
    ((SECONDS < deadline)) || { print_status >&2; die "the sentinels did not agree on a master (with its replica and each other) within ${START_TIMEOUT}s"; }
    sleep 0.2
  done
  log "running: master $HOST:$(master_of "${SENTINEL_PORTS[0]}"), replica, sentinels on ${SENTINEL_PORTS[*]} (name $NAME; ready in $((SECONDS - t0))s; state in $STATE_DIR)"
}

do_stop() {
  local p any=0
  for p in $(all_ports); do
    if running_pid "$p" >/dev/null || (port_open "$p" && ours "$p"); then any=1; fi
  done
  if ((any == 0)); then
    log "not running"
    return 0
  fi
  # Sentinels first, so that stopping the master does not start a failover.
  for p in "${SENTINEL_PORTS[@]}" "${DATA_PORTS[@]}"; do stop_port "$p"; done
  log "stopped"
}

do_status() {
  local p up=0
  for p in $(all_ports); do pings "$p" && up=$((up + 1)); done
  if ((up == 0)); then
    log "not running"
    return 3
  fi
  if healthy; then log "running"; else log "degraded: $up of 5 processes answer, or the sentinels do not agree yet"; fi
  print_status
  healthy || return 1
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  restart) do_stop; do_start ;;
  start-node)
    port="${2:-}"
    [[ " ${DATA_PORTS[*]} " == *" $port "* ]] || die "start-node expects one of ${DATA_PORTS[*]}, got '$port'"
    if pings "$port"; then log "node $port already answers"; exit 0; fi
    [[ -f "$(node_dir "$port")/redis.conf" ]] || die "node $port has no redis.conf in $(node_dir "$port"): start the setup first"
    redis-server "$(node_dir "$port")/redis.conf"
    wait_ping "$port"
    log "node $port started"
    ;;
  *) echo "usage: $0 start|stop|status|restart|start-node PORT" >&2; exit 2 ;;
esac
