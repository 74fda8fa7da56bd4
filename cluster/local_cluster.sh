#!/usr/bin/env bash
# A real two-node Ray cluster on this one machine: a head node and a worker node, each its own
# raylet, object store and temp dir, one CPU each (override with NUM_CPUS). For trying
# distcheck on a cluster (joining, tasks spread over nodes, losing a node) without a cluster.
#
#   cluster/local_cluster.sh start        # start both nodes; prints the address to join
#   cluster/local_cluster.sh status       # `ray status` of this cluster
#   cluster/local_cluster.sh kill-worker  # kill the worker node's raylet (simulates losing a node)
#   cluster/local_cluster.sh stop         # stop every process of this cluster (and only those)
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

# The processes of one node: their command lines name the node's temp dir (unique to us).
node_pids() {
  pgrep -f -- "$1" || true
}

start() {
  if [[ -n "$(node_pids "$HEAD_DIR")" ]]; then
    echo "already running (cluster/local_cluster.sh stop first)" >&2
    exit 1
  fi
  mkdir -p "$HEAD_DIR" "$WORKER_DIR"
  if [[ "$RAY_AUTH_MODE" == token && ! -s "$HOME/.ray/auth_token" && -z "${RAY_AUTH_TOKEN:-}" ]]; then
    "$RAY" get-auth-token --generate >/dev/null
  fi
  # Started from the repository root, so that workers import this checkout's distcheck.
  cd "$REPO"
  "$RAY" start --head --port="$PORT" --num-cpus="$NUM_CPUS" --include-dashboard=false \
    --temp-dir="$HEAD_DIR" --disable-usage-stats >"$STATE/head.log" 2>&1
  # A second node on the same machine: its own temp dir, and its own dashboard-agent port
  # (the default one is taken by the head's agent).
  "$RAY" start --address="127.0.0.1:$PORT" --num-cpus="$NUM_CPUS" --temp-dir="$WORKER_DIR" \
    --dashboard-agent-listen-port=$((PORT + 2)) --disable-usage-stats >"$STATE/worker.log" 2>&1
  echo "Ray cluster: 2 nodes x $NUM_CPUS CPUs (RAY_AUTH_MODE=$RAY_AUTH_MODE); logs in $STATE"
  echo "Run checks on it:  DISTCHECK_EXECUTOR=ray DISTCHECK_RAY_ADDRESS=127.0.0.1:$PORT <your test command>"
}

status() {
  "$RAY" status --address="127.0.0.1:$PORT"
}

kill_worker() {
  local pids
  pids="$(pgrep -f -- "raylet.*$WORKER_DIR" || true)"
  if [[ -z "$pids" ]]; then
    echo "no worker raylet running" >&2
    exit 1
  fi
  kill -9 $pids
  echo "killed the worker node's raylet (pid $pids); Ray declares the node dead after ~15 s"
}

stop() {
  # The worker node first, then the head; SIGTERM, then SIGKILL what is left after 10 s
  # (a head may ignore SIGTERM for several seconds).
  local dir pids
  for dir in "$WORKER_DIR" "$HEAD_DIR"; do
    pids="$(node_pids "$dir")"
    [[ -n "$pids" ]] && kill $pids 2>/dev/null || true
  done
  for _ in $(seq 20); do
    [[ -z "$(node_pids "$STATE")" ]] && break
    sleep 0.5
  done
  pids="$(node_pids "$STATE")"
  [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
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
