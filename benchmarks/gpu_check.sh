#!/usr/bin/env bash
# distcheck on a real GPU, without Ray: its CUDA tests, verdict parity with torch's own gradcheck
# loop on CUDA, and one large slow-mode check timed by both. Run from the repository root on a
# machine with a CUDA GPU and torch (2.11 or later); nothing else is needed (no Ray, no network):
#
#     bash benchmarks/gpu_check.sh            # prints (t) tests, (a) parity and (b) the large check
#
# (t) the tests that skip without CUDA (tests/engines/test_torch_device_path.py,
#     tests/suites/test_torch_opinfo_cuda.py), with pytest, where pytest is installed.
# (a) `distcheck run --serial --device cuda` over 40 ops (float64 and complex128, grad and
#     gradgrad, fast mode), then torch.autograd.gradcheck over the same cases (same samples,
#     same seeds) by benchmarks/gpu_parity.py: every verdict must be the same. A step stopped by
#     its time limit still counts what it did: distcheck writes its partial report on SIGTERM,
#     and the torch loop stops after its --seconds and says how many cases it left.
# (b) conv2d + tanh with 3,776 input elements in slow mode: torch's gradcheck, then
#     distcheck.gradcheck (batched Jacobian blocks: the comparisons decided batched and the
#     fallbacks are printed), then distcheck's element-by-element path, on the GPU: times and
#     verdicts.
# Budget: under 9 minutes (each step has its own limit). DEVICE=cpu tries the script on a machine
# without a GPU; KEEP=DIR copies the logs and the run's report there; OPS=a,b,c checks those ops
# instead of the 40 (e.g. the ones an earlier run's time limit left out). See docs/cuda.md.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONHASHSEED=0 OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
if [ -z "${OPS:-}" ]; then
OPS=sin,cos,tan,sinh,cosh,tanh,exp,log,sqrt,rsqrt,sigmoid,abs,neg,reciprocal,pow,add,sub,mul,div.no_rounding_mode
OPS=$OPS,atan2,mm,matmul,bmm,addmm,sum,mean,prod,cumsum,cumprod,logsumexp,softmax,log_softmax,nn.functional.relu
OPS=$OPS,nn.functional.gelu,nn.functional.silu,nn.functional.linear,nn.functional.conv2d,nn.functional.layer_norm
OPS=$OPS,linalg.norm,trace
fi

echo "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), device $DEVICE, work in $WORK"
"$PY" - <<'PY'
import os, platform, numpy, torch
print(f"gpu_check: Python {platform.python_version()}, numpy {numpy.__version__}, torch {torch.__version__}, "
      f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO GPU'}, "
      f"{os.cpu_count()} CPUs")
PY

echo "== (t) the CUDA tests"
tests=0
if "$PY" -c "import pytest" 2>/dev/null; then
    timeout 100 "$PY" -m pytest -q -p no:cacheprovider -p no:randomly tests/engines/test_torch_device_path.py \
        tests/suites/test_torch_opinfo_cuda.py > "$WORK/tests.log" 2>&1
    tests=$?
    tail -n 15 "$WORK/tests.log"
else
    echo "gpu_check: no pytest here, tests not run"
fi

echo "== (a) parity: distcheck run --serial --device $DEVICE"
start=$(date +%s)
timeout 170 "$PY" -m distcheck run --serial --device "$DEVICE" --mode fast --checks grad,gradgrad \
    --dtypes float64,complex128 --ops "$OPS" --out "$WORK/run" --json "$WORK/distcheck.json" > "$WORK/run.log" 2>&1
echo "gpu_check: distcheck run exit $? in $(( $(date +%s) - start )) s"
tail -n 6 "$WORK/run.log"
parity=1
if [ -f "$WORK/distcheck.json" ]; then
    timeout 170 "$PY" benchmarks/gpu_parity.py parity "$WORK/distcheck.json" --seconds 140
    parity=$?
fi

echo "== (b) one large check, slow mode"
timeout 90 "$PY" benchmarks/gpu_parity.py large
large=$?
echo "gpu_check: tests exit $tests, parity exit $parity, large exit $large"
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" && cp "$WORK"/tests.log "$WORK"/run.log "$WORK"/distcheck.json "$KEEP"/ 2>/dev/null
fi
[ "$tests" -eq 0 ] && [ "$parity" -eq 0 ] && [ "$large" -eq 0 ]
