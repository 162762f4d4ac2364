# Shared by scripts/redis-cluster.sh and scripts/redis-sentinel.sh (sourced, not run): the helpers that find, wait for
# and stop this instance's redis-server processes. The sourcing script sets TAG (its name, for messages), STATE_DIR
# (one directory per port below it, holding redis.pid and the logs), HOST and START_TIMEOUT first.

log() { echo "$TAG: $*"; }
die() { echo "$TAG: $*" >&2; exit 1; }

command -v redis-server >/dev/null || die "redis-server is not on PATH (apt-get install -y redis-server)"
command -v redis-cli >/dev/null || die "redis-cli is not on PATH (apt-get install -y redis-tools)"

cli() { local port="$1"; shift; timeout 5 redis-cli -h "$HOST" -p "$port" "$@" 2>/dev/null; }
node_dir() { echo "$STATE_DIR/$1"; }
pid_file() { echo "$STATE_DIR/$1/redis.pid"; }
pings() { [[ "$(cli "$1" ping)" == PONG ]]; }
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# The pid of this instance's process on the port when it is alive, else nothing.
running_pid() {
  local f pid
  f="$(pid_file "$1")"
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

wait_ping() {
  local port="$1" deadline=$((SECONDS + START_TIMEOUT))
  until pings "$port"; do
    ((SECONDS < deadline)) || { tail -n 20 "$(node_dir "$port")"/*.log >&2 2>/dev/null || true; die "port $port did not answer PING within ${START_TIMEOUT}s"; }
    sleep 0.05
  done
}

# Stops the process on the port: ours by its pid file, or one whose data is ours (the script's own `ours`) by
# SHUTDOWN; waits until the port is free.
stop_port() {
  local port="$1" pid
  if pid="$(running_pid "$port")"; then
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  elif port_open "$port" && ours "$port"; then
    cli "$port" shutdown nosave >/dev/null || true
  fi
  rm -f "$(pid_file "$port")"
  local deadline=$((SECONDS + 10))
  while port_open "$port"; do
    ((SECONDS < deadline)) || die "port $port is still taken after stopping it"
    sleep 0.05
  done
}
