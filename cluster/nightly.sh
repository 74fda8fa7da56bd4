#!/usr/bin/env bash
# The nightly full-suite validation on a Ray cluster: every check kind of the torch-opinfo suite
# in fast mode (as PyTorch's CI runs it) and in slow mode (full Jacobians, as its periodic
# slow-gradcheck job), plus the tensorplay-opinfo suite, each with a JSON report, JUnit XML and an
# HTML report; each run is then compared with the previous night's (`distcheck compare`: new
# failures, fixed, still failing, much slower...), printed and kept as markdown. Run it on a node
# of the cluster (or anywhere that can join it); exit status 1 if any run had a failing, erroring
# or timed-out case.
#
#   cluster/nightly.sh                       # joins the cluster `ray start` began on this node
#   ADDRESS=10.0.0.5:6379 cluster/nightly.sh # another cluster
#   ADDRESS=local cluster/nightly.sh         # a local Ray on this machine's cores
#
# A run folder per suite and mode goes next to its report (OUT/SUITE-MODE/); run again the same
# day, the script resumes the runs that were interrupted and skips the finished ones.
#
# Settings (environment): ADDRESS (default auto), OUT (report folder, default
# reports/nightly-YYYY-MM-DD), PREVIOUS (the previous night's report folder, default the latest
# other reports/nightly-* folder), PYTHON (default: this repo's .venv python), TIMEOUT (seconds per
# case, default 1800), SUITES (default "torch-opinfo:fast torch-opinfo:slow tensorplay-opinfo:fast").
# The previous night's report of each suite (in PREVIOUS) orders the work longest first
# (--durations).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
ADDRESS="${ADDRESS:-auto}"
OUT="${OUT:-$REPO/reports/nightly-$(date +%F)}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
TIMEOUT="${TIMEOUT:-1800}"
SUITES="${SUITES:-torch-opinfo:fast torch-opinfo:slow tensorplay-opinfo:fast}"
mkdir -p "$OUT"
if [[ -z "${PREVIOUS:-}" ]]; then
  PREVIOUS="$(ls -d "$REPO"/reports/nightly-* 2>/dev/null | grep -vxF "$(cd "$OUT" && pwd)" | sort | tail -n 1)"
fi

status=0
for entry in $SUITES; do
  suite="${entry%%:*}"
  mode="${entry##*:}"
  name="$suite-$mode"
  report="$OUT/$name.json"
  folder="$OUT/$name"
  last=""
  [[ -n "$PREVIOUS" && -f "$PREVIOUS/$name.json" ]] && last="$PREVIOUS/$name.json"
  reports=(--json "$report" --junit "$OUT/$name.junit.xml" --html "$OUT/$name.html")
  if [[ -f "$folder/report.json" ]] && grep -q '"complete": true' "$folder/report.json"; then
    echo "== $suite ($mode): done already ($report)"
    continue
  elif [[ -f "$folder/records.jsonl" ]]; then  # interrupted: finish it
    echo "== $suite ($mode) resumed -> $report"
    "$PYTHON" -m distcheck run --resume "$folder" --address "$ADDRESS" "${reports[@]}"
  else
    echo "== $suite ($mode) -> $report${last:+ (longest first, from $last)}"
    "$PYTHON" -m distcheck run --suite "$suite" --mode "$mode" --timeout "$TIMEOUT" --address "$ADDRESS" \
      --out "$folder" "${reports[@]}" ${last:+--durations "$last"}
  fi
  code=$?
  if [[ $code -ne 0 ]]; then
    echo "!! $suite ($mode) exited with status $code"
    status=1
  fi
  if [[ -n "$PREVIOUS" && -f "$PREVIOUS/$name.json" && -f "$report" ]]; then
    echo "== $suite ($mode) compared with $PREVIOUS"
    "$PYTHON" -m distcheck compare "$PREVIOUS/$name.json" "$report" --fail-on none
    "$PYTHON" -m distcheck compare "$PREVIOUS/$name.json" "$report" --fail-on none --format markdown \
      > "$OUT/$name.compare.md"
  else
    echo "== $suite ($mode): no previous night's report to compare with"
  fi
done
echo "reports in $OUT"
exit $status
