#!/usr/bin/env bash
# The nightly full-suite validation on a Ray cluster: every check kind of the torch-opinfo suite
# in fast mode (as PyTorch's CI runs it) and in slow mode (full Jacobians, as its periodic
# slow-gradcheck job), plus the tensorplay-opinfo suite, each with a JSON report. Run it on a
# node of the cluster (or anywhere that can join it); exit status 1 if any run had a failing,
# erroring or timed-out case.
#
#   cluster/nightly.sh                       # joins the cluster `ray start` began on this node
#   ADDRESS=10.0.0.5:6379 cluster/nightly.sh # another cluster
#   ADDRESS=local cluster/nightly.sh         # a local Ray on this machine's cores
#
# A run folder per suite and mode goes next to its report (OUT/SUITE-MODE/); run again the same
# day, the script resumes the runs that were interrupted and skips the finished ones.
#
# Settings (environment): ADDRESS (default auto), OUT (report folder, default
# reports/nightly-YYYY-MM-DD), PYTHON (default: this repo's .venv python), TIMEOUT (seconds per
# case, default 1800), SUITES (default "torch-opinfo:fast torch-opinfo:slow tensorplay-opinfo:fast").
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
ADDRESS="${ADDRESS:-auto}"
OUT="${OUT:-$REPO/reports/nightly-$(date +%F)}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
TIMEOUT="${TIMEOUT:-1800}"
SUITES="${SUITES:-torch-opinfo:fast torch-opinfo:slow tensorplay-opinfo:fast}"
mkdir -p "$OUT"

status=0
for entry in $SUITES; do
  suite="${entry%%:*}"
  mode="${entry##*:}"
  report="$OUT/$suite-$mode.json"
  folder="$OUT/$suite-$mode"
  if [[ -f "$folder/report.json" ]] && grep -q '"complete": true' "$folder/report.json"; then
    echo "== $suite ($mode): done already ($report)"
    continue
  elif [[ -f "$folder/records.jsonl" ]]; then  # interrupted: finish it
    echo "== $suite ($mode) resumed -> $report"
    "$PYTHON" -m distcheck run --resume "$folder" --address "$ADDRESS" --json "$report"
  else
    echo "== $suite ($mode) -> $report"
    "$PYTHON" -m distcheck run --suite "$suite" --mode "$mode" --timeout "$TIMEOUT" --address "$ADDRESS" \
      --out "$folder" --json "$report"
  fi
  code=$?
  if [[ $code -ne 0 ]]; then
    echo "!! $suite ($mode) exited with status $code"
    status=1
  fi
done
echo "reports in $OUT"
exit $status
