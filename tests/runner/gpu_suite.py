"""A suite on logical GPUs, for the GPU-share tests (no CUDA needed): it declares ``cuda``, and
its cases say where they ran instead of checking anything.

- ``where``: the case errors with ``visible=<CUDA_VISIBLE_DEVICES> gpus=<ray.get_gpu_ids()>
  pid=<pid>``, what Ray gave the runner that ran it;
- ``oom``: the check raises torch's CUDA out-of-memory error (as a GPU that is full would);
- ``sin``: a correct check (passes), so that a runner is seen to go on after an OOM.

Run as a module (``python -m tests.runner.gpu_suite GPUS CPUS SHARE``), it starts a local Ray
with that many logical GPUs and CPUs, runs the suite on ``cuda`` with ``SHARE`` GPUs a runner,
and prints the result as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator

import torch

from distcheck.suites.base import RUN, BuiltCase, CaseId, CaseInfo, CheckCall, GroupInfo, Selection, enumerate_cases

OPS = ("where", "oom", "sin")


def _where(x):
    import ray

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise RuntimeError(f"visible={visible} gpus={ray.get_gpu_ids()} pid={os.getpid()}")


def _oom(x):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


class GpuSuite:
    name = "gpufake"
    engine = "torch"
    devices = ("cpu", "cuda")

    def __init__(self, mode: str = "fast", device: str = "cpu", samples: int = 6):
        self.mode, self.device, self.samples = mode, device, samples

    def with_device(self, device: str) -> GpuSuite:
        return GpuSuite(self.mode, device, self.samples)

    def prepare(self) -> None:
        pass

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        return enumerate_cases(self, selection)

    def groups(self, selection: Selection) -> Iterator[GroupInfo]:
        for op in selection.ops or OPS:
            yield GroupInfo(self.name, op, "float64", ("grad",))

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        device = None if self.device == "cpu" else "cuda"
        ids = (CaseId(self.name, group.op, "float64", "grad", k, device) for k in range(self.samples))
        return [CaseInfo(case, RUN, "", f"fp-{group.op}") for case in ids]

    def build(self, case: CaseId) -> BuiltCase:
        x = torch.linspace(0.1, 0.9, 4, dtype=torch.float64).requires_grad_()  # CPU tensors: logical GPUs
        func = {"where": _where, "oom": _oom}.get(case.op, torch.sin)
        return BuiltCase(case, func, (x,), (CheckCall("gradcheck", {"fast_mode": True}),), f"fp-{case.op}")


def main(gpus: float, cpus: int, share: float) -> None:
    import ray

    from distcheck.runner import RunOptions, run_suite

    ray.init(address="local", num_cpus=cpus, num_gpus=gpus, include_dashboard=False)
    try:
        result = run_suite(GpuSuite(device="cuda", samples=2 * cpus), Selection(), RunOptions(gpus_per_runner=share))
        records = [{"id": r.id, "verdict": r.verdict, "message": r.message} for r in result.records]
        print(json.dumps({"workers": result.workers, "placement": result.placement, "records": records}))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
