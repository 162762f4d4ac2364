#!/usr/bin/env bash
# Enables the RabbitMQ plugins the tests and the bench need on the local node: the management API (the fault tests
# close connections through it), the shovel (a bench baseline) and STOMP on 127.0.0.1:61614 (the second STOMP peer).
# Called by the tests' global setup (test/support/global-setup.ts) and by .ci/run, so that `npm test` on a fresh
# machine, whose RabbitMQ has no plugin enabled, needs no other step.
#
#   scripts/rabbitmq-plugins.sh enable|status
#
# `enable` is idempotent: it enables only what is missing and prints one line saying what it did. `status` exits 0
# when everything answers, 1 (naming what does not) otherwise. Both need a local node that `rabbitmqctl` reaches:
# on a remote RabbitMQ nothing is changed (the caller names what is missing instead).
#
# STOMP is never on 61613: that is ActiveMQ's port, and the clash stops RabbitMQ from booting. The listener is set
# on the running node before the plugin starts, and written to rabbitmq.conf (new format) for the next boot.
set -euo pipefail

MANAGEMENT_URL=http://127.0.0.1:15672/api/overview
STOMP_HOST=127.0.0.1
STOMP_PORT=61614
PLUGINS=(rabbitmq_management rabbitmq_shovel rabbitmq_shovel_management rabbitmq_stomp)
TIMEOUT="${RABBITMQ_PLUGINS_TIMEOUT:-120}"

log() { echo "rabbitmq-plugins: $*"; }
die() { echo "rabbitmq-plugins: $*" >&2; exit 1; }

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

management_ok() {
  # guest/guest: the only user a fresh node has, and the one the tests use locally.
  curl -fsS -o /dev/null -m 5 -u guest:guest "$MANAGEMENT_URL" 2>/dev/null
}

wait_for() {
  local what="$1"
  shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@"; do
    ((SECONDS < deadline)) || die "$what did not answer within ${TIMEOUT}s"
    sleep 1
  done
}

require_local_node() {
  command -v rabbitmqctl >/dev/null 2>&1 || die "rabbitmqctl is not installed here: RabbitMQ is not local, nothing changed"
  rabbitmqctl -q status >/dev/null 2>&1 || die "rabbitmqctl does not reach a running local node, nothing changed"
}

# The plugins of PLUGINS not explicitly enabled, one per line.
missing_plugins() {
  local enabled
  enabled="$(rabbitmq-plugins list -E -m -q 2>/dev/null || true)"
  local p
  for p in "${PLUGINS[@]}"; do
    grep -qx "$p" <<<"$enabled" || echo "$p"
  done
}

# rabbitmq.conf as the node reads it (new format only; an Erlang-term advanced.config is left alone).
conf_file() {
  local conf="${RABBITMQ_CONFIG_FILE:-/etc/rabbitmq/rabbitmq.conf}"
  [[ "$conf" == *.conf ]] || conf="$conf.conf"
  echo "$conf"
}

# Writes the STOMP listener to rabbitmq.conf for the next boot, when the file exists and names none; prints the file.
persist_stomp_listener() {
  local conf
  conf="$(conf_file)"
  [[ -f "$conf" ]] || return 0
  grep -q '^[[:space:]]*stomp\.listeners\.tcp' "$conf" && return 0
  # A file without a final newline would glue our line onto its last one.
  [[ -z "$(tail -c 1 "$conf")" ]] || echo >>"$conf"
  echo "stomp.listeners.tcp.1 = $STOMP_HOST:$STOMP_PORT" >>"$conf"
  echo "$conf"
}

cmd_status() {
  local problems=()
  require_local_node
  local missing
  missing="$(missing_plugins | paste -sd ' ' -)"
  [[ -z "$missing" ]] || problems+=("not enabled: $missing")
  management_ok || problems+=("the management API does not answer on 127.0.0.1:15672")
  tcp_open "$STOMP_HOST" "$STOMP_PORT" || problems+=("nothing answers on $STOMP_HOST:$STOMP_PORT (STOMP)")
  if ((${#problems[@]})); then
    log "$(IFS=';'; echo "${problems[*]}" | sed 's/;/; /g')"
    exit 1
  fi
  log "management, shovel and STOMP ($STOMP_HOST:$STOMP_PORT) enabled"
}

cmd_enable() {
  require_local_node
  local missing=()
  mapfile -t missing < <(missing_plugins)
  local done_what=()
  if [[ " ${missing[*]} " == *" rabbitmq_stomp "* ]]; then
    # Before the plugin starts: it binds its listeners from this environment, and the default is 61613.
    rabbitmqctl -q eval "application:load(rabbitmq_stomp), application:set_env(rabbitmq_stomp, tcp_listeners, [{\"$STOMP_HOST\", $STOMP_PORT}])." >/dev/null
  fi
  if ((${#missing[@]})); then
    rabbitmq-plugins enable -q "${missing[@]}" >/dev/null
    done_what+=("enabled ${missing[*]}")
  fi
  local conf
  conf="$(persist_stomp_listener)"
  [[ -z "$conf" ]] || done_what+=("added the STOMP listener to $conf")
  wait_for "the management API on 127.0.0.1:15672" management_ok
  wait_for "RabbitMQ's STOMP on $STOMP_HOST:$STOMP_PORT" tcp_open "$STOMP_HOST" "$STOMP_PORT"
  if ((${#done_what[@]})); then
    log "$(printf '%s; ' "${done_what[@]}" | sed 's/; $//') (STOMP on $STOMP_HOST:$STOMP_PORT)"
  else
    log "management, shovel and STOMP ($STOMP_HOST:$STOMP_PORT) already enabled"
  fi
}

case "${1:-}" in
  enable) cmd_enable ;;
  status) cmd_status ;;
  *) die "usage: $0 enable|status" ;;
esac
