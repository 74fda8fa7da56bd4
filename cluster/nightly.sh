#!/usr/bin/env bash
# The nightly full-suite validation on a Ray cluster: every check kind of the torch-opinfo suite
# in fast mode (as PyTorch's CI runs it) and in slow mode (full Jacobians, as its periodic
# slow-gradcheck job), plus the tensorplay-opinfo suite, each with a JSON report, JUnit XML and an
# HTML report; each run is then compared with the previous night's (`distcheck compare`: new
# failures, fixed, still failing, much slower...), printed and kept as markdown. Each finished run is
# added to the history store (HISTORY): its summary and the comparison mark each failure new,
# failing since NIGHT or flaky, the HTML report has a trends section, and the suite's history is
# kept as markdown (distcheck history; docs/history.md). Run it on a node
# of the cluster (or anywhere that can join it), or submit it as a Ray job; exit status 1 if any
# run had a failing, erroring or timed-out case.
#
#   cluster/nightly.sh                       # joins the cluster `ray start` began on this node
#   ADDRESS=10.0.0.5:6379 cluster/nightly.sh # another cluster
#   ADDRESS=local cluster/nightly.sh         # a local Ray on this machine's cores
#   OUT=s3://bucket/nightly-$(date +%F) PREVIOUS=s3://bucket/nightly-$(date -d yesterday +%F) cluster/nightly.sh
#
# A run folder per suite and mode goes next to its report (OUT/SUITE-MODE/); run again the same
# day, the script resumes the runs that were interrupted and skips the finished ones.
#
# Settings (environment): ADDRESS (default $RAY_ADDRESS, which `ray job submit` sets, else auto),
# OUT (report folder, a path or an object store's URL; default reports/nightly-YYYY-MM-DD),
# PREVIOUS (the previous night's report folder, a path or URL; default the latest other local
# reports/nightly-* folder), PYTHON (default: this repo's .venv python, else python), TIMEOUT
# (seconds per case, default 1800), SUITES (SUITE:MODE or SUITE:MODE:DEVICE entries, default
# "torch-opinfo:fast torch-opinfo:slow tensorplay-opinfo:fast"; a device such as cuda runs that
# suite on the cluster's GPUs), HISTORY (the history store, a path or URL; default: history beside
# OUT, e.g. reports/history or s3://bucket/history).
# The previous night's report of each suite (in PREVIOUS) orders the work longest first (--durations).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
ADDRESS="${ADDRESS:-${RAY_ADDRESS:-auto}}"
OUT="${OUT:-$REPO/reports/nightly-$(date +%F)}"
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON="$REPO/.venv/bin/python"
  [[ -x "$PYTHON" ]] || PYTHON=python
fi
TIMEOUT="${TIMEOUT:-1800}"
SUITES="${SUITES:-torch-opinfo:fast torch-opinfo:slow tensorplay-opinfo:fast}"
HISTORY="${HISTORY:-${OUT%/*}/history}"

# OUT and PREVIOUS may be URLs of an object store: files are looked for and written by distcheck.
store() { "$PYTHON" -c "import sys; from distcheck.storage import location, segments; $1" "${@:2}"; }
exists() { store 'sys.exit(not location.exists(sys.argv[1]))' "$1"; }
has_records() { store 'sys.exit(not segments.has_records(sys.argv[1]))' "$1"; }
finished() {  # the run folder holds the report of a complete run
  store 'import json; p = sys.argv[1]; sys.exit(not (location.exists(p) and json.loads(location.read_text(p))["summary"].get("complete")))' "$1/report.json"
}
write_stdin() { store 'location.write_text(sys.argv[1], sys.stdin.read())' "$1"; }

if [[ "$OUT" != *://* ]]; then
  mkdir -p "$OUT"
  if [[ -z "${PREVIOUS:-}" ]]; then
    PREVIOUS="$(ls -d "$REPO"/reports/nightly-* 2>/dev/null | grep -vxF "$(cd "$OUT" && pwd)" | sort | tail -n 1)"
  fi
fi
PREVIOUS="${PREVIOUS:-}"

status=0
for entry in $SUITES; do
  IFS=: read -r suite mode device <<< "$entry"
  device="${device:-cpu}"
  name="$suite-$mode"
  [[ "$device" != cpu ]] && name="$name-$device"
  report="$OUT/$name.json"
  folder="$OUT/$name"
  last=""
  [[ -n "$PREVIOUS" ]] && exists "$PREVIOUS/$name.json" && last="$PREVIOUS/$name.json"
  reports=(--json "$report" --junit "$OUT/$name.junit.xml" --html "$OUT/$name.html" --history "$HISTORY")
  if finished "$folder"; then
    echo "== $suite ($mode): done already ($report)"
    continue
  elif has_records "$folder"; then  # interrupted: finish it
    echo "== $suite ($mode) resumed -> $report"
    "$PYTHON" -m distcheck run --resume "$folder" --address "$ADDRESS" "${reports[@]}"
  else
    echo "== $suite ($mode) -> $report${last:+ (longest first, from $last)}"
    "$PYTHON" -m distcheck run --suite "$suite" --mode "$mode" --device "$device" --timeout "$TIMEOUT" \
      --address "$ADDRESS" --out "$folder" "${reports[@]}" ${last:+--durations "$last"}
  fi
  code=$?
  if [[ $code -ne 0 ]]; then
    echo "!! $suite ($mode) exited with status $code"
    status=1
  fi
  if [[ -n "$last" ]] && exists "$report"; then
    echo "== $suite ($mode) compared with $PREVIOUS"
    "$PYTHON" -m distcheck compare "$last" "$report" --fail-on none --history "$HISTORY"
    "$PYTHON" -m distcheck compare "$last" "$report" --fail-on none --history "$HISTORY" --format markdown \
      | write_stdin "$OUT/$name.compare.md"
  else
    echo "== $suite ($mode): no previous night's report to compare with"
  fi
  "$PYTHON" -m distcheck history "$HISTORY" --suite "$suite" --mode "$mode" --format markdown \
    | write_stdin "$OUT/$name.history.md"
done
echo "reports in $OUT"
exit $status
