#!/usr/bin/env bash
# A real two-node Ray cluster on this one machine: a head node and a worker node, each its own
# raylet, object store and temp dir, one CPU each (override with NUM_CPUS). For trying
# distcheck on a cluster (joining, tasks spread over nodes, losing a node) without a cluster.
#
#   cluster/local_cluster.sh start        # start both nodes; prints the address to join
#   cluster/local_cluster.sh status       # `ray status` of this cluster
#   cluster/local_cluster.sh kill-worker  # SIGKILL every process of the worker node (losing a node)
#   cluster/local_cluster.sh stop         # stop every process of this cluster (and only those)
#
# Each node runs in a session of its own (started with setsid; its id is kept in STATE/head.sid
# and STATE/worker.sid; Ray's worker processes get process groups of their own, but stay in
# the session): kill-worker and stop signal those sessions' processes, never processes found by
# name, so that other Rays on the machine are never touched.
#
# Settings (environment): PORT (head GCS port, default 6390), NUM_CPUS (per node, default 1),
# STATE (temp dirs, default /tmp/distcheck-cluster), RAY (the ray command, default: the one
# next to this repo's .venv python, else `ray` on PATH), RAY_AUTH_MODE (default token).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PORT="${PORT:-6390}"
NUM_CPUS="${NUM_CPUS:-1}"
STATE="${STATE:-/tmp/distcheck-cluster}"
if [[ -z "${RAY:-}" ]]; then
  if [[ -x "$REPO/.venv/bin/ray" ]]; then RAY="$REPO/.venv/bin/ray"; else RAY=ray; fi
fi
# Token authentication, said explicitly (Ray's default): drivers need the token in
# ~/.ray/auth_token (or RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH) and RAY_AUTH_MODE=token.
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"
# A task killed by Ray's memory monitor is retried this often, not forever (Ray's default).
export RAY_task_oom_retries="${RAY_task_oom_retries:-2}"
HEAD_DIR="$STATE/head"
WORKER_DIR="$STATE/worker"

# Whether the session of node $1 (head or worker) has a process left.
alive() {
  [[ -s "$STATE/$1.sid" ]] && pgrep -s "$(cat "$STATE/$1.sid")" >/dev/null
}

# Send signal $2 to every process of the session of node $1.
signal_node() {
  if alive "$1"; then pkill "-$2" -s "$(cat "$STATE/$1.sid")" || true; fi
}

# Run `ray start ...` in a new session whose id goes into STATE/$1.sid.
start_node() {
  local node="$1"
  shift
  setsid -w bash -c 'echo $$ > "$0"; exec "$@"' "$STATE/$node.sid" "$RAY" start "$@" >"$STATE/$node.log" 2>&1
}

start() {
  if alive head; then
    echo "already running (cluster/local_cluster.sh stop first)" >&2
    exit 1
  fi
  mkdir -p "$HEAD_DIR" "$WORKER_DIR"
  if [[ "$RAY_AUTH_MODE" == token && ! -s "$HOME/.ray/auth_token" && -z "${RAY_AUTH_TOKEN:-}" ]]; then
    "$RAY" get-auth-token --generate >/dev/null
  fi
  # Started from the repository root, so that workers import this checkout's distcheck.
  cd "$REPO"
  start_node head --head --port="$PORT" --num-cpus="$NUM_CPUS" --include-dashboard=false \
    --temp-dir="$HEAD_DIR" --disable-usage-stats
  # A second node on the same machine: its own temp dir, and its own dashboard-agent port
  # (the default one is taken by the head's agent).
  start_node worker --address="127.0.0.1:$PORT" --num-cpus="$NUM_CPUS" --temp-dir="$WORKER_DIR" \
    --dashboard-agent-listen-port=$((PORT + 2)) --disable-usage-stats
  echo "Ray cluster: 2 nodes x $NUM_CPUS CPUs (RAY_AUTH_MODE=$RAY_AUTH_MODE); logs in $STATE"
  echo "Run checks on it:  DISTCHECK_EXECUTOR=ray DISTCHECK_RAY_ADDRESS=127.0.0.1:$PORT <your test command>"
}

status() {
  "$RAY" status --address="127.0.0.1:$PORT"
}

kill_worker() {
  if ! alive worker; then
    echo "no worker node running" >&2
    exit 1
  fi
  signal_node worker KILL
  echo "killed the worker node (session $(cat "$STATE/worker.sid")); Ray declares it dead after ~15 s"
}

stop() {
  # The worker node first, then the head; SIGTERM, then SIGKILL what is left after 10 s
  # (a head may ignore SIGTERM for several seconds).
  signal_node worker TERM
  signal_node head TERM
  for _ in $(seq 20); do
    alive worker || alive head || break
    sleep 0.5
  done
  signal_node worker KILL
  signal_node head KILL
  echo "stopped"
}

case "${1:-}" in
  start) start ;;
  status) status ;;
  kill-worker) kill_worker ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|status|kill-worker|stop" >&2
    exit 2
    ;;
esac
