#!/usr/bin/env bash
# Runs the project's own Redis Cluster (Debian's redis-server 7.0): 3 masters + 3 replicas on 127.0.0.1:7000–7005,
# AOF on, cluster-node-timeout 2000 ms (a SIGKILLed master's replica is promoted within a few seconds), for tests, CI
# (.ci/run) and the fault suite (--redis cluster).
#
#   scripts/redis-cluster.sh start|stop|status|restart
#   scripts/redis-cluster.sh start-node PORT   # (re)starts one node in its existing directory: it rejoins the cluster
#                                              # with its nodes.conf (as a replica when its replica was promoted)
#
# Idempotent: `start` on a healthy cluster (all nodes answer, cluster_state:ok everywhere, 3 masters with a replica
# each) does nothing; on anything else (some nodes left from an earlier run, a half-made cluster) it stops this
# instance's nodes, wipes their directories and creates the cluster afresh (a few seconds). `stop` on a stopped
# cluster does nothing.
# State lives in .redis-local/cluster/<port>/ at the repo root (gitignored; override with REDIS_LOCAL_DIR); ports
# with REDIS_CLUSTER_BASE_PORT (default 7000: 7000–7005). A port taken by a Redis that is not this instance's (its
# `dir` is elsewhere) is never touched while that folder exists: `start` then fails with a sentence naming it. One
# whose folder is gone (an orphan: its checkout was removed with the cluster running) is stopped and replaced.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_DIR="${REDIS_LOCAL_DIR:-$REPO_DIR/.redis-local}/cluster"
HOST=127.0.0.1
BASE_PORT="${REDIS_CLUSTER_BASE_PORT:-7000}"
PORTS=()
for i in 0 1 2 3 4 5; do PORTS+=($((BASE_PORT + i))); done
NODE_TIMEOUT_MS="${REDIS_CLUSTER_NODE_TIMEOUT:-2000}"
START_TIMEOUT="${REDIS_CLUSTER_START_TIMEOUT:-30}"

TAG=redis-cluster
# shellcheck source=redis-local.inc.sh
source "$SCRIPT_DIR/redis-local.inc.sh"

# True when the Redis answering on the port keeps its data in this instance's directory for that port.
ours() {
  local dir theirs mine
  dir="$(cli "$1" config get dir | sed -n 2p)"
  # Both folders must exist: two that do not would compare equal.
  theirs="$(cd "$dir" 2>/dev/null && pwd -P)" || return 1
  mine="$(cd "$(node_dir "$1")" 2>/dev/null && pwd -P)" || return 1
  [[ -n "$dir" && "$theirs" == "$mine" ]]
}

info_field() { cli "$1" cluster info | tr -d '\r' | sed -n "s/^$2://p"; }

# Healthy: every node answers with cluster_state:ok, 6 known nodes and 3 masters that serve slots.
healthy() {
  local p
  for p in "${PORTS[@]}"; do
    [[ "$(info_field "$p" cluster_state)" == ok ]] || return 1
    [[ "$(info_field "$p" cluster_known_nodes)" == 6 ]] || return 1
    [[ "$(info_field "$p" cluster_size)" == 3 ]] || return 1
    # Every node must also see the 3 replicas as replicas (just after a create, a node may still list one as an
    # empty master).
    [[ "$(cli "$p" cluster nodes | awk '$3 ~ /slave/ && $8 == "connected"' | wc -l)" == 3 ]] || return 1
  done
}

start_node() {
  local port="$1" dir
  dir="$(node_dir "$port")"
  mkdir -p "$dir"
  redis-server --port "$port" --bind "$HOST" --protected-mode no \
    --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout "$NODE_TIMEOUT_MS" \
    --appendonly yes --appendfsync everysec --save "" --dir "$dir" \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
}

print_nodes() {
  local p
  for p in "${PORTS[@]}"; do
    if pings "$p"; then
      # id → address first, so that a replica line can name its master's address.
      cli "$p" cluster nodes | awk '
        { split($2, a, "@"); addr[$1] = a[1]; line[NR] = $0 }
        END {
          for (i = 1; i <= NR; i++) {
            split(line[i], f, " "); split(f[2], a, "@"); flags = f[3]; sub(/myself,/, "", flags)
            what = (flags ~ /slave/) ? "replica of " addr[f[4]] : (flags ~ /master/ ? "master" : flags)
            if (flags ~ /fail/) what = what " (" flags ")"
            slots = ""; for (j = 9; j <= length(f); j++) slots = slots " " f[j]
            printf "  %-16s %-28s %s\n", a[1], what, (slots == "" ? "" : "slots" slots)
          }
        }' | sort
      return 0
    fi
  done
  return 1
}

do_start() {
  local p orphans=0
  if healthy; then
    # Another checkout's cluster on these ports would pass for ours, and the tests' kill/restart helpers, which work on
    # this instance's directory, would then fail in ways that say nothing.
    for p in "${PORTS[@]}"; do
      if ours "$p"; then continue; fi
      if orphaned "$p"; then orphans=1; continue; fi
      die "the healthy Redis Cluster on $HOST:${PORTS[0]}-${PORTS[5]} is not this instance's: port $p keeps its data in $(owner_dir "$p" "$(cli "$p" config get dir | sed -n 2p)"), not in $STATE_DIR; stop it with the scripts/redis-cluster.sh of that checkout, or choose other ports with REDIS_CLUSTER_BASE_PORT"
    done
    if ((orphans == 0)); then
      log "already running: 3 masters + 3 replicas on $HOST:${PORTS[0]}-${PORTS[5]}, cluster_state:ok"
      return 0
    fi
  fi
  for p in "${PORTS[@]}"; do
    if port_open "$p" && ! running_pid "$p" >/dev/null && ! ours "$p"; then
      if orphaned "$p"; then
        log "port $p: a Redis left by a removed checkout (it worked in $(owner_dir "$p")); stopping it"
        continue
      fi
      die "port $p is taken by a Redis (or another process) that is not this instance's: it keeps its data in $(owner_dir "$p" "$(cli "$p" config get dir | sed -n 2p)"), not in $STATE_DIR; stop it, or choose other ports with REDIS_CLUSTER_BASE_PORT"
    fi
  done
  local t0=$SECONDS
  for p in "${PORTS[@]}"; do stop_port "$p"; done
  rm -rf "$STATE_DIR"
  mkdir -p "$STATE_DIR"
  for p in "${PORTS[@]}"; do start_node "$p"; done
  for p in "${PORTS[@]}"; do wait_ping "$p"; done
  local addrs=()
  for p in "${PORTS[@]}"; do addrs+=("$HOST:$p"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$STATE_DIR/create.log" 2>&1 \
    || { cat "$STATE_DIR/create.log" >&2; die "redis-cli --cluster create failed"; }
  local deadline=$((SECONDS + START_TIMEOUT))
  until healthy; do
    ((SECONDS < deadline)) || { print_nodes >&2 || true; die "the cluster did not reach cluster_state:ok on all nodes within ${START_TIMEOUT}s"; }
    sleep 0.1
  done
  log "running: 3 masters + 3 replicas on $HOST:${PORTS[0]}-${PORTS[5]}, cluster_state:ok (created in $((SECONDS - t0))s; state in $STATE_DIR)"
  print_nodes
}

do_stop() {
  local p any=0
  for p in "${PORTS[@]}"; do
    if running_pid "$p" >/dev/null || (port_open "$p" && ours "$p"); then any=1; fi
  done
  if ((any == 0)); then
    log "not running"
    return 0
  fi
  for p in "${PORTS[@]}"; do stop_port "$p"; done
  log "stopped (state kept in $STATE_DIR; the next start creates the cluster afresh)"
}

do_status() {
  local p up=0
  for p in "${PORTS[@]}"; do pings "$p" && up=$((up + 1)); done
  if ((up == 0)); then
    log "not running"
    return 3
  fi
  if healthy; then
    log "running: cluster_state:ok on all $up nodes"
  else
    log "degraded: $up of 6 nodes answer; cluster_state:$(info_field "${PORTS[0]}" cluster_state || echo '?') on ${PORTS[0]}"
  fi
  print_nodes || true
  healthy || return 1
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  restart) do_stop; do_start ;;
  start-node)
    port="${2:-}"
    [[ " ${PORTS[*]} " == *" $port "* ]] || die "start-node expects one of ${PORTS[*]}, got '$port'"
    if pings "$port"; then log "node $port already answers"; exit 0; fi
    [[ -f "$(node_dir "$port")/nodes.conf" ]] || die "node $port has no nodes.conf in $(node_dir "$port"): start the cluster first"
    start_node "$port"
    wait_ping "$port"
    log "node $port started"
    ;;
  *) echo "usage: $0 start|stop|status|restart|start-node PORT" >&2; exit 2 ;;
esac
