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

# The directory the Redis (or sentinel) on the port works in — its `dir`: a node's data, a sentinel's config — as the
# kernel has it (/proc/PID/cwd), which ends in " (deleted)" once that directory was removed; nothing when the process
# is not one of this machine's redis-server processes for that port (its pid from INFO, checked against its command
# line, so that a pid from another pid namespace is never taken for a process of ours).
work_dir() {
  local port="$1" pid
  pid="$(cli "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  # Read whole, not piped into `grep -q`: grep quitting early would SIGPIPE tr, and pipefail would then say no.
  local cmd
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 0
  [[ "$cmd" =~ redis-server.*:$port([^0-9]|$) ]] || return 0
  readlink "/proc/$pid/cwd" 2>/dev/null || true
}

# True when the process on the port was left by a checkout that is gone: the directory it works in no longer exists
# (a clone's folder removed while its Cluster or Sentinel ran on). Nobody can stop it with the scripts of its
# checkout any more, so a `start` stops it and starts this instance's.
orphaned() { [[ "$(work_dir "$1")" == *" (deleted)" ]]; }

# Where the process on the port keeps its data, for a sentence; `fallback` when it cannot be seen from here.
owner_dir() {
  local d
  d="$(work_dir "$1")"
  echo "${d:-${2:-a folder this script cannot see}}"
}

# Stops the process on the port: ours by its pid file, or one whose data is ours (the script's own `ours`) or an
# orphan's (`orphaned`) by SHUTDOWN; waits until the port is free.
stop_port() {
  local port="$1" pid
  if pid="$(running_pid "$port")"; then
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  elif port_open "$port" && { ours "$port" || orphaned "$port"; }; then
    cli "$port" shutdown nosave >/dev/null || true
  fi
  rm -f "$(pid_file "$port")"
  local deadline=$((SECONDS + 10))
  while port_open "$port"; do
    ((SECONDS < deadline)) || die "port $port is still taken after stopping it"
    sleep 0.05
  done
}
