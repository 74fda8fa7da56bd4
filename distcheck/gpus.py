"""GPUs for a run on device ``cuda`` (docs/cuda.md): is there one (serial: this machine's torch
must see it; Ray: the cluster's ``GPU`` resource, ``cuda`` only), how many runners fit
(``min(CPUs, G / gpus_per_runner)``), what a CUDA out-of-memory says, and the memory budget of
a slow-mode case on the device. The torch queries sit behind :data:`cuda`, so that tests on a
machine without a GPU can put a fake device in its place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distcheck.devices import CPU, device_index, device_type
from distcheck.suites.base import UsageError

RAM_FRACTION = 0.25  # as for the CPU: a slow-mode case's Jacobians may take this fraction of the device


class TorchCuda:
    """The CUDA queries of this process's torch (imported only when asked)."""

    @staticmethod
    def _torch():
        import torch

        return torch

    def is_available(self) -> bool:
        try:
            return self._torch().cuda.is_available()
        except ImportError:
            return False

    def device_count(self) -> int:
        return self._torch().cuda.device_count() if self.is_available() else 0

    def describe(self) -> str:
        """What this torch is, for the message of a machine without the device."""
        try:
            torch = self._torch()
        except ImportError:
            return "torch is not installed"
        built = torch.version.cuda
        return f"torch {torch.__version__}, " + (f"built with CUDA {built}" if built else "built without CUDA")

    def memory(self, device: str) -> tuple[int, int, int]:
        """``(allocated, reserved, total)`` bytes of ``device`` (total 0 if unknown)."""
        cuda = self._torch().cuda
        index = device_index(device)
        allocated, reserved = cuda.memory_allocated(index), cuda.memory_reserved(index)
        try:
            total = cuda.get_device_properties(index if index is not None else cuda.current_device()).total_memory
        except (RuntimeError, AssertionError):  # no device after all
            total = 0
        return int(allocated), int(reserved), int(total)

    def free_cache(self) -> None:
        if self.is_available():
            self._torch().cuda.empty_cache()


cuda = TorchCuda()


def is_cuda(device: str) -> bool:
    return device_type(device) != CPU


def check_local(device: str) -> None:
    """UsageError (one line) unless this process's torch has ``device``."""
    if not is_cuda(device):
        return
    if not cuda.is_available():
        raise UsageError(f"--device {device}: this machine has no CUDA device ({cuda.describe()}); use --device cpu")
    index, count = device_index(device), cuda.device_count()
    if index is not None and index >= count:
        raise UsageError(f"--device {device}: this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")


def check_gpus_per_runner(gpus_per_runner: float) -> None:
    if not 0 < gpus_per_runner <= 1 and not (gpus_per_runner > 1 and float(gpus_per_runner).is_integer()):
        raise UsageError(
            f"--gpus-per-runner {gpus_per_runner:g}: a fraction of one GPU (0 < F <= 1, e.g. 0.25 for four runners "
            "on a GPU) or a whole number of GPUs"
        )


def check_ray_device(device: str) -> None:
    """UsageError unless ``device`` can be asked of Ray (``cuda``, not ``cuda:N``)."""
    if device_index(device) is not None:
        raise UsageError(
            f"--device {device} names one GPU of one machine: on Ray use --device {device_type(device)} "
            "(Ray gives each runner its own GPU through CUDA_VISIBLE_DEVICES), or add --serial"
        )


def ray_runners(device: str, cpus: int, gpus: float, gpus_per_runner: float) -> int:
    """How many runners a Ray cluster of ``cpus`` CPUs and ``gpus`` GPUs takes for ``device``;
    UsageError (one line) if it cannot run any."""
    check_ray_device(device)
    if gpus < gpus_per_runner:
        have = "no GPU" if not gpus else f"{gpus:g} GPU(s)"
        raise UsageError(
            f"--device {device}: the Ray cluster has {have} ({cpus} CPUs), and a runner asks for "
            f"{gpus_per_runner:g} (--gpus-per-runner); start its nodes with GPUs (`ray start --num-gpus=N`) "
            "or use --device cpu"
        )
    return max(1, min(cpus, math.floor(gpus / gpus_per_runner + 1e-9)))


def placement(runners: int, gpus: float, gpus_per_runner: float) -> str:
    """What a run says of its runners on GPUs: "8 runners on 2 GPUs (0.25 GPU each)"."""
    return f"{runners} runner(s) on {gpus:g} GPU(s) ({gpus_per_runner:g} GPU each)"


@dataclass(frozen=True)
class OutOfMemory:
    """A CUDA out-of-memory, in figures."""

    allocated: int
    reserved: int
    total: int

    def describe(self) -> str:
        mb = 2**20
        total = f"{self.total / mb:,.0f} MB" if self.total else "unknown"
        return (
            f"CUDA out of memory (allocated {self.allocated / mb:,.0f} MB, reserved {self.reserved / mb:,.0f} MB, "
            f"device total {total}); the runner freed torch's cache and went on"
        )


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is torch's CUDA out-of-memory (without importing torch)."""
    return any(cls.__name__ == "OutOfMemoryError" and cls.__module__.startswith("torch") for cls in type(error).__mro__)


def out_of_memory(device: str) -> OutOfMemory:
    """The device's figures after an out-of-memory; torch's cache freed (what the case held is
    garbage by now: the next case starts with the device's memory back)."""
    try:
        figures = cuda.memory(device if is_cuda(device) else "cuda")
    except Exception:  # the device itself is gone: still an error, without figures
        figures = (0, 0, 0)
    cuda.free_cache()
    return OutOfMemory(*figures)


def device_max_jacobian_mb(device: str) -> float | None:
    """The default memory budget of a slow-mode case on ``device``: a quarter of its memory
    (None if it cannot be read here: then the machine's RAM decides, as on the CPU)."""
    try:
        _, _, total = cuda.memory(device)
    except Exception:
        return None
    return total * RAM_FRACTION / 2**20 if total else None
