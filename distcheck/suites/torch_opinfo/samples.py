"""OpInfo samples, generated deterministically and kept for the cases that use them.

``op.sample_inputs`` draws its tensors from the global RNGs (torch, ``random``, numpy). Left
to itself it reseeds them before every sample with a seed that depends on the unittest test
calling it, if any (found by walking the stack), and complex128 samples are drawn before any
reseeding. So this module owns the seeding: it seeds all three RNGs with :data:`SAMPLE_SEED`,
generates the op's whole sample list in order with ``set_seed=False`` and indexes into it. The
same (op, dtype, mode) then gives bitwise the same samples in every process (that runs with
the same ``PYTHONHASHSEED``: see :mod:`distcheck.hash_seed`).

The sample list of an (op, dtype) serves every check kind and sample index of it: a process
keeps the last few lists, with the fingerprint of each sample as generated. Some ops change
their samples when they run (batch norm updates the running statistics it is given), so a
sample is handed out only while its fingerprint is unchanged; otherwise the list is generated
afresh.

test_inplace_grad of an op that claims no in-place autograd iterates the op's plain sample list
(``op.sample_inputs(device, dtype, requires_grad=True)``: no conjugated samples, all sizes):
``plain=True`` here.
"""

from __future__ import annotations

import collections
import random
import threading
import warnings

import numpy as np
import torch

from distcheck.suites.torch_opinfo.fingerprint import fingerprint

SAMPLE_SEED = 1234
_KEPT = 3  # sample lists per process
_cache: collections.OrderedDict[tuple[str, str, bool, str, bool], tuple[list, list[str]]] = collections.OrderedDict()
_lock = threading.RLock()  # the global RNGs are per process: one generation at a time


def seed_everything(seed: int) -> None:
    """Seed the global RNGs that sample functions and gradient checks draw from."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def generate(op, dtype: torch.dtype, small: bool, device: str = "cpu", plain: bool = False) -> list:
    """The sample list ``_check_helper`` iterates for ``op`` in ``dtype`` on ``device`` (``small``:
    the ``small_inputs_only`` samples of the slow-gradcheck job; ``plain``: the list of
    ``sample_inputs``' defaults instead), seeded by this module."""
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seed_everything(SAMPLE_SEED)
        samples = op.sample_inputs(
            device,
            dtype,
            requires_grad=True,
            include_conjugated_inputs=not plain and bool(op.test_conjugated_samples and dtype.is_complex),
            small_inputs_only=small and not plain,
            set_seed=False,
        )
        return list(samples)


def _entry(
    op, dtype: torch.dtype, small: bool, device: str, plain: bool, fresh: bool = False
) -> tuple[list, list[str]]:
    key = (op.full_name, str(dtype), small and not plain, device, plain)
    with _lock:
        if fresh or key not in _cache:
            samples = generate(op, dtype, small, device, plain)
            _cache[key] = (samples, [fingerprint(s) for s in samples])
            while len(_cache) > _KEPT:
                _cache.popitem(last=False)
        _cache.move_to_end(key)
        return _cache[key]


def generated(op, dtype: torch.dtype, small: bool, device: str = "cpu", plain: bool = False) -> tuple[list, list[str]]:
    """The sample list, and the fingerprint of each sample as generated."""
    return _entry(op, dtype, small, device, plain)


def sample(
    op, dtype: torch.dtype, small: bool, index: int, device: str = "cpu", plain: bool = False
) -> tuple[object, str]:
    """Sample ``index`` of the list, exactly as generated, and its fingerprint."""
    samples, prints = _entry(op, dtype, small, device, plain)
    if not 0 <= index < len(samples):
        raise LookupError(f"{op.full_name} has {len(samples)} samples in {dtype} (asked for sample {index})")
    if fingerprint(samples[index]) != prints[index]:  # an earlier case's run changed it
        samples, prints = _entry(op, dtype, small, device, plain, fresh=True)
    return samples[index], prints[index]
