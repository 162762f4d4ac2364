#!/usr/bin/env bash
# Enables the RabbitMQ plugins the tests and the bench need on the local node: the management API (the fault tests
# close connections through it), the shovel (a bench baseline), STOMP on 127.0.0.1:61614 (the second STOMP peer) and
# MQTT on 127.0.0.1:1884 (a 3.1.1 MQTT peer), and AMQP 1.0 (rabbitmq_amqp1_0: on the AMQP port, 5672, beside 0-9-1; the
# protocol header tells them apart, so it needs no listener of its own).
# Called by the tests' global setup (test/support/global-setup.ts) and by .ci/run, so that `npm test` on a fresh
# machine, whose RabbitMQ has no plugin enabled, needs no other step.
#
#   scripts/rabbitmq-plugins.sh enable|status
#
# `enable` is idempotent: it enables only what is missing and prints one line saying what it did. `status` exits 0
# when everything answers, 1 (naming what does not) otherwise. Both need a local node that `rabbitmqctl` reaches:
# on a remote RabbitMQ nothing is changed (the caller names what is missing instead).
#
# STOMP is never on 61613 (ActiveMQ's port) and MQTT never on 1883 (Mosquitto's): a clash stops RabbitMQ from booting.
# Each listener is written to rabbitmq.conf (new format; the file is created when it does not exist) for the next boot
# and checked there BEFORE its plugin is enabled — an MQTT plugin enabled with no listener in the file leaves a node
# that does not boot after its next restart — then set on the running node before the plugin starts.
set -euo pipefail

MANAGEMENT_URL=http://127.0.0.1:15672/api/overview
STOMP_HOST=127.0.0.1
STOMP_PORT=61614
MQTT_HOST=127.0.0.1
MQTT_PORT=1884
PLUGINS=(rabbitmq_management rabbitmq_shovel rabbitmq_shovel_management rabbitmq_stomp rabbitmq_mqtt rabbitmq_amqp1_0)
# The listener lines rabbitmq.conf must hold for the plugins to boot where they should.
STOMP_LINE="stomp.listeners.tcp.1 = $STOMP_HOST:$STOMP_PORT"
MQTT_LINE="mqtt.listeners.tcp.1 = $MQTT_HOST:$MQTT_PORT"
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

# Writes a listener (`stomp` or `mqtt`, its line) to rabbitmq.conf for the next boot, when the file names no listener of
# that protocol; creates the file when it does not exist (a missing file used to be skipped silently: the listener then
# lived only in the running node, and the next boot bound the plugin's default port). Prints the file when it wrote.
persist_listener() {
  local proto="$1" line="$2" conf
  conf="$(conf_file)"
  if [[ ! -f "$conf" ]]; then
    mkdir -p "$(dirname "$conf")" 2>/dev/null || die "cannot create $(dirname "$conf") for $conf; nothing enabled"
    : >"$conf" 2>/dev/null || die "cannot create $conf; nothing enabled"
  fi
  grep -q "^[[:space:]]*$proto\.listeners\.tcp" "$conf" && return 0
  # A file without a final newline would glue our line onto its last one.
  [[ ! -s "$conf" || -z "$(tail -c 1 "$conf")" ]] || echo >>"$conf"
  echo "$line" >>"$conf" || die "cannot write to $conf; nothing enabled"
  echo "$conf"
}

# Fails (before any plugin is enabled) unless rabbitmq.conf names a listener for `proto` on the port we chose.
check_listener() {
  local proto="$1" port="$2" conf
  conf="$(conf_file)"
  grep -Eq "^[[:space:]]*$proto\.listeners\.tcp\.[^=]*=[[:space:]]*([^[:space:]]*:)?$port[[:space:]]*\$" "$conf" 2>/dev/null ||
    die "$conf names no $proto listener on port $port (one on another port is left as it is: fix it by hand); nothing enabled"
}

cmd_status() {
  local problems=()
  require_local_node
  local missing
  missing="$(missing_plugins | paste -sd ' ' -)"
  [[ -z "$missing" ]] || problems+=("not enabled: $missing")
  management_ok || problems+=("the management API does not answer on 127.0.0.1:15672")
  tcp_open "$STOMP_HOST" "$STOMP_PORT" || problems+=("nothing answers on $STOMP_HOST:$STOMP_PORT (STOMP)")
  tcp_open "$MQTT_HOST" "$MQTT_PORT" || problems+=("nothing answers on $MQTT_HOST:$MQTT_PORT (MQTT)")
  if ((${#problems[@]})); then
    log "$(IFS=';'; echo "${problems[*]}" | sed 's/;/; /g')"
    exit 1
  fi
  log "management, shovel, STOMP ($STOMP_HOST:$STOMP_PORT), MQTT ($MQTT_HOST:$MQTT_PORT) and AMQP 1.0 enabled"
}

cmd_enable() {
  require_local_node
  local missing=()
  mapfile -t missing < <(missing_plugins)
  local done_what=()
  # The file first, checked, for both listeners: a plugin enabled now starts again at the next boot with what it says.
  local conf wrote=()
  conf="$(persist_listener stomp "$STOMP_LINE")"
  [[ -z "$conf" ]] || wrote+=("STOMP")
  conf="$(persist_listener mqtt "$MQTT_LINE")"
  [[ -z "$conf" ]] || wrote+=("MQTT")
  check_listener stomp "$STOMP_PORT"
  check_listener mqtt "$MQTT_PORT"
  ((${#wrote[@]} == 0)) || done_what+=("added the $(printf '%s and ' "${wrote[@]}" | sed 's/ and $//') listener$( ((${#wrote[@]} > 1)) && echo s) to $(conf_file)")
  # Before each plugin starts: it binds its listeners from this environment, and the defaults are 61613 and 1883.
  if [[ " ${missing[*]} " == *" rabbitmq_stomp "* ]]; then
    rabbitmqctl -q eval "application:load(rabbitmq_stomp), application:set_env(rabbitmq_stomp, tcp_listeners, [{\"$STOMP_HOST\", $STOMP_PORT}])." >/dev/null
  fi
  if [[ " ${missing[*]} " == *" rabbitmq_mqtt "* ]]; then
    rabbitmqctl -q eval "application:load(rabbitmq_mqtt), application:set_env(rabbitmq_mqtt, tcp_listeners, [{\"$MQTT_HOST\", $MQTT_PORT}])." >/dev/null
  fi
  if ((${#missing[@]})); then
    rabbitmq-plugins enable -q "${missing[@]}" >/dev/null
    done_what+=("enabled ${missing[*]}")
  fi
  wait_for "the management API on 127.0.0.1:15672" management_ok
  wait_for "RabbitMQ's STOMP on $STOMP_HOST:$STOMP_PORT" tcp_open "$STOMP_HOST" "$STOMP_PORT"
  wait_for "RabbitMQ's MQTT on $MQTT_HOST:$MQTT_PORT" tcp_open "$MQTT_HOST" "$MQTT_PORT"
  local where="STOMP on $STOMP_HOST:$STOMP_PORT, MQTT on $MQTT_HOST:$MQTT_PORT"
  if ((${#done_what[@]})); then
    log "$(printf '%s; ' "${done_what[@]}" | sed 's/; $//') ($where)"
  else
    log "management, shovel, STOMP, MQTT and AMQP 1.0 already enabled ($where)"
  fi
}

case "${1:-}" in
  enable) cmd_enable ;;
  status) cmd_status ;;
  *) die "usage: $0 enable|status" ;;
esac
