#!/usr/bin/env bash
# distcheck on a real GPU, without Ray: verdict parity with torch's own gradcheck loop on CUDA,
# and one large slow-mode check timed by both. Run from the repository root on a machine with
# a CUDA GPU and torch (2.11 or later); nothing else is needed (no Ray, no network):
#
#     bash benchmarks/gpu_check.sh            # prints (a) parity and (b) the large check
#
# (a) `distcheck run --serial --device cuda` over 40 ops (float64 and complex128, grad and
#     gradgrad, fast mode), then torch.autograd.gradcheck over the same cases (same samples,
#     same seeds) by benchmarks/gpu_parity.py: every verdict must be the same.
# (b) conv2d + tanh with 3,776 input elements in slow mode: torch's gradcheck, then
#     distcheck.gradcheck, on the GPU: times and verdicts.
# Budget: under 8 minutes on one H200 (each step has its own timeout). See docs/cuda.md.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONHASHSEED=0 OMP_NUM_THREADS=1
OUT=${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
OPS=sin,cos,tan,sinh,cosh,tanh,exp,log,sqrt,rsqrt,sigmoid,abs,neg,reciprocal,pow,add,sub,mul,div.no_rounding_mode
OPS=$OPS,atan2,mm,matmul,bmm,addmm,sum,mean,prod,cumsum,cumprod,logsumexp,softmax,log_softmax,nn.functional.relu
OPS=$OPS,nn.functional.gelu,nn.functional.silu,nn.functional.linear,nn.functional.conv2d,nn.functional.layer_norm
OPS=$OPS,linalg.norm,trace

echo "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), output in $OUT"
"$PY" - <<'PY'
import torch
print(f"gpu_check: torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO GPU'}")
PY

echo "== (a) parity: distcheck run --serial --device cuda"
start=$(date +%s)
timeout 190 "$PY" -m distcheck run --serial --device cuda --mode fast --checks grad,gradgrad \
    --dtypes float64,complex128 --ops "$OPS" --out "$OUT/run" --json "$OUT/distcheck.json" > "$OUT/run.log" 2>&1
echo "gpu_check: distcheck run exit $? in $(( $(date +%s) - start )) s"
tail -n 6 "$OUT/run.log"
parity=1
if [ -f "$OUT/distcheck.json" ]; then
    timeout 190 "$PY" benchmarks/gpu_parity.py parity "$OUT/distcheck.json"
    parity=$?
fi

echo "== (b) one large check, slow mode"
timeout 90 "$PY" benchmarks/gpu_parity.py large
large=$?
echo "gpu_check: parity exit $parity, large exit $large"
[ "$parity" -eq 0 ] && [ "$large" -eq 0 ]
