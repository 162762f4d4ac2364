#!/usr/bin/env bash
# Runs the project's own ActiveMQ Classic instance (Debian's package, 5.17) with a STOMP connector on
# 127.0.0.1:61613 (and MQTT on 127.0.0.1:1885), for tests, CI (.ci/run) and fault tests.
#
#   scripts/activemq.sh start|stop|status|restart
#
# Idempotent: `start` on a running instance and `stop` on a stopped one succeed and do nothing.
# The instance lives in .activemq/ at the repo root (gitignored; override with ACTIVEMQ_INSTANCE_DIR): conf/ is
# rewritten from scripts/activemq/ on every start, data/ (KahaDB, logs) is kept, so `restart` keeps persistent
# messages. The broker runs as the calling user (root on CI): Debian's packaged instance switches to a user that
# cannot write under the repo.
#
# MQTT: Debian's activemq-mqtt.jar needs the MQTT codec of libmqtt-client-java (org.fusesource.mqtt), which the
# activemq package does not pull in; without it the connector accepts TCP and never answers CONNECT (its log says
# NoClassDefFoundError: org/fusesource/mqtt/codec/PINGRESP). `start` installs that package and links its jars into the
# instance's lib/ (on ActiveMQ's extension class path); a broker started before that needs a `restart`, which `status`
# and `start` say.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
INSTANCE_DIR="${ACTIVEMQ_INSTANCE_DIR:-$REPO_DIR/.activemq}"
CONF_DIR="$INSTANCE_DIR/conf"
DATA_DIR="$INSTANCE_DIR/data"
PID_FILE="$INSTANCE_DIR/activemq.pid"
OUT_FILE="$DATA_DIR/console.log"
ACTIVEMQ_HOME=/usr/share/activemq
STOMP_HOST=127.0.0.1
STOMP_PORT=61613
MQTT_PORT=1885
# The MQTT codec ActiveMQ's MQTT transport loads (libmqtt-client-java) and what it needs (libhawtdispatch-java).
MQTT_JARS=(/usr/share/java/mqtt-client.jar /usr/share/java/hawtdispatch.jar /usr/share/java/hawtdispatch-transport.jar)
START_TIMEOUT="${ACTIVEMQ_START_TIMEOUT:-60}"
STOP_TIMEOUT="${ACTIVEMQ_STOP_TIMEOUT:-30}"

log() { echo "activemq: $*"; }
die() { echo "activemq: $*" >&2; exit 1; }

ensure_installed() {
  if dpkg -s activemq >/dev/null 2>&1 && [[ -f "$ACTIVEMQ_HOME/bin/activemq.jar" ]]; then
    return 0
  fi
  log "installing Debian's activemq package"
  export DEBIAN_FRONTEND=noninteractive
  # Only refresh the package lists when they are missing (a fresh machine) or when the install fails with them.
  if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
    apt-get update -qq
  fi
  if ! apt-get install -y -qq --no-install-recommends activemq >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends activemq >/dev/null
  fi
  [[ -f "$ACTIVEMQ_HOME/bin/activemq.jar" ]] || die "the activemq package is installed but $ACTIVEMQ_HOME/bin/activemq.jar is missing"
  command -v java >/dev/null || die "java is not on PATH (the activemq package should have pulled in a JRE)"
}

ensure_mqtt_codec() {
  local jar
  for jar in "${MQTT_JARS[@]}"; do [[ -f "$jar" ]] || break; done
  [[ -f "$jar" ]] && return 0
  log "installing Debian's libmqtt-client-java (the MQTT codec of ActiveMQ's MQTT connector)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends libmqtt-client-java >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends libmqtt-client-java >/dev/null
  fi
  for jar in "${MQTT_JARS[@]}"; do [[ -f "$jar" ]] || die "libmqtt-client-java is installed but $jar is missing"; done
}

# True when an MQTT 3.1.1 CONNECT on the MQTT port is answered with a CONNACK that accepts it (20 02 00 00).
mqtt_ready() {
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "\x10\x15\x00\x04MQTT\x04\x02\x00\x0a\x00\x09bb-probe1" >&3
    [[ "$(head -c 4 <&3 | od -An -tx1 | tr -d " \n")" == 20020000 ]] || exit 1
    printf "\xe0\x00" >&3
  ' "$STOMP_HOST" "$MQTT_PORT" 2>/dev/null
}

# A line about MQTT for `start` and `status`: answering, or what to do.
mqtt_note() {
  if mqtt_ready; then
    echo "MQTT on $STOMP_HOST:$MQTT_PORT"
  elif grep -q 'NoClassDefFoundError: org/fusesource/mqtt' "$OUT_FILE" 2>/dev/null; then
    echo "MQTT on $STOMP_HOST:$MQTT_PORT does not answer: this broker started without the MQTT codec; run \`$0 restart\`"
  else
    echo "MQTT on $STOMP_HOST:$MQTT_PORT does not answer CONNECT"
  fi
}

# The pid from the pid file when that process is alive, else nothing.
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

port_open() {
  (exec 3<>"/dev/tcp/$STOMP_HOST/$STOMP_PORT") 2>/dev/null
}

# True when a STOMP CONNECT on the port is answered with CONNECTED (TCP alone can be accepted before the broker is up).
stomp_ready() {
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:0,0\n\n\0" >&3
    IFS= read -r -t 2 line <&3 || exit 1
    [[ "$line" == CONNECTED* ]] || exit 1
    printf "DISCONNECT\n\n\0" >&3
    exec 3>&-
  ' "$STOMP_HOST" "$STOMP_PORT" 2>/dev/null
}

log_tail() {
  local f
  for f in "$OUT_FILE"; do
    if [[ -f "$f" ]]; then
      echo "----- last lines of $f -----" >&2
      tail -n 40 "$f" >&2
    fi
  done
}

write_conf() {
  mkdir -p "$CONF_DIR" "$DATA_DIR" "$INSTANCE_DIR/lib"
  cp "$SCRIPT_DIR/activemq/activemq.xml" "$CONF_DIR/activemq.xml"
  cp "$SCRIPT_DIR/activemq/log4j.properties" "$CONF_DIR/log4j.properties"
  local jar
  for jar in "${MQTT_JARS[@]}"; do ln -sf "$jar" "$INSTANCE_DIR/lib/"; done
}

do_start() {
  ensure_installed
  ensure_mqtt_codec
  local pid
  if pid="$(running_pid)"; then
    if stomp_ready; then
      log "already running (pid $pid), STOMP on $STOMP_HOST:$STOMP_PORT; $(mqtt_note)"
      return 0
    fi
    log "pid $pid is alive but STOMP does not answer yet; waiting"
  else
    if port_open; then
      die "port $STOMP_PORT is already taken by another process (not this instance: $INSTANCE_DIR); stop it first"
    fi
    write_conf
    rm -f "$PID_FILE"
    log "starting ActiveMQ (instance $INSTANCE_DIR)"
    # setsid: the broker must outlive the shell (and CI step) that started it, and not get its signals.
    setsid java -Xms128M -Xmx512M -Djava.awt.headless=true \
      -Dlog4j.configuration="file:$CONF_DIR/log4j.properties" \
      -Dactivemq.home="$ACTIVEMQ_HOME" -Dactivemq.base="$INSTANCE_DIR" \
      -Dactivemq.conf="$CONF_DIR" -Dactivemq.data="$DATA_DIR" \
      -jar "$ACTIVEMQ_HOME/bin/activemq.jar" start "xbean:file:$CONF_DIR/activemq.xml" \
      >"$OUT_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
  fi
  local deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      echo "activemq: the broker exited during start-up" >&2
      log_tail
      exit 1
    fi
    if stomp_ready; then
      log "running (pid $pid), STOMP on $STOMP_HOST:$STOMP_PORT; $(mqtt_note)"
      return 0
    fi
    sleep 0.2
  done
  echo "activemq: STOMP on $STOMP_HOST:$STOMP_PORT did not answer CONNECT within ${START_TIMEOUT}s (pid $pid still running)" >&2
  log_tail
  exit 1
}

do_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    log "not running"
    return 0
  fi
  log "stopping (pid $pid)"
  # SIGTERM runs ActiveMQ's shutdown hook, which closes KahaDB cleanly.
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid did not stop within ${STOP_TIMEOUT}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$PID_FILE"
  deadline=$((SECONDS + STOP_TIMEOUT))
  while port_open; do
    ((SECONDS < deadline)) || die "port $STOMP_PORT is still taken after the broker stopped"
    sleep 0.2
  done
  log "stopped"
}

do_status() {
  local pid
  if pid="$(running_pid)"; then
    if stomp_ready; then
      log "running (pid $pid), STOMP on $STOMP_HOST:$STOMP_PORT; $(mqtt_note)"
      return 0
    fi
    log "pid $pid is alive but STOMP on $STOMP_HOST:$STOMP_PORT does not answer"
    return 1
  fi
  log "not running"
  return 3
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  restart) do_stop; do_start ;;
  *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
