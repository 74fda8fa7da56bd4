"""Finite differences on torch tensors: the outputs of a checked function with one input
element (or the whole input, along a direction) moved in place, and restored.

Two ways to move an input. The general one works on any tensor: copy ``original + step`` into
the moved part with torch, call, copy ``original`` back. For an input on a device (a GPU) the
outputs stay there, as tensors (no copy to the host per evaluation): the central differences
are taken on the device and a block of columns is copied to the host once (see
``finite_differences.jacobian_columns``'s ``stack``). The CPU fast paths (the last section
of this file, and the only place that decides when they apply) move a CPU tensor's elements
through a numpy view of its memory instead: the same IEEE arithmetic, a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from distcheck.engines.torch_tensors import call, element_rows, perturbable, tensor_of, wanted_numpy
from distcheck.numerics.finite_differences import Evaluate

Outputs = list[np.ndarray | None]


def perturbed_evaluator(func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]) -> Evaluate:
    """evaluate(k, delta): the wanted outputs with flat element k of ``inputs[position]`` (of
    its specified values, if sparse) moved by ``delta``."""
    data = perturbable(inputs[position])
    view = _element_view(data)
    if view is not None:
        return _numpy_perturbed(func, inputs, outputs, view)
    shape = tuple(data.shape)
    flat = data.view(-1) if data.is_contiguous() else None

    def evaluate(k: int, delta: complex) -> Outputs:
        entry = flat[k] if flat is not None else data[np.unravel_index(k, shape)]
        return outputs_moved(func, inputs, outputs, entry, delta)

    return evaluate


def direction_evaluator(
    func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]
) -> Callable[[np.ndarray], Outputs]:
    """evaluate(delta): the wanted outputs with ``inputs[position]`` moved by ``delta`` (an
    array of its dense shape; a sparse input moves its specified values only)."""
    x = inputs[position]
    data = perturbable(x)
    rows = element_rows(x)
    view = _direction_view(data)
    wanted = list(outputs)

    def evaluate(delta: np.ndarray) -> Outputs:
        step = np.asarray(delta).reshape(-1)
        if rows is not None:
            step = step[rows]
        if view is not None and step.dtype == view.dtype:
            return _numpy_moved(func, inputs, wanted, view, step)
        # a CPU draw (torch's fast mode draws its vectors on the CPU), moved to the input's device
        moved = tensor_of(step).reshape(data.shape).to(data.device)
        return outputs_moved(func, inputs, outputs, data, moved)

    return evaluate


def outputs_moved(func: Callable, inputs: tuple, outputs: Sequence[bool], entry: torch.Tensor, step) -> Outputs:
    """The wanted outputs with ``entry`` (part of an input, in place) moved by ``step``; ``entry``
    restored afterwards. Numpy copies, or for an input on a device, copies on that device."""
    original = entry.clone()
    entry.copy_(original + step)
    try:  # copy the outputs before restoring: an output may be a view of the input
        produced = call(func, inputs)
        if on_device(entry):
            return wanted_on_device(produced, outputs)
        return wanted_numpy(produced, outputs)
    finally:
        entry.copy_(original)


def on_device(t: torch.Tensor) -> bool:
    """Whether finite differences of ``t`` stay on its device (not the CPU)."""
    return t.device.type != "cpu"


def wanted_on_device(outputs: tuple, wanted: Sequence[bool]) -> list[torch.Tensor | None]:
    """Copies of the wanted tensor outputs where they are (dense, lazy conjugation resolved)."""
    return [
        o.detach().resolve_conj().resolve_neg().clone() if want and isinstance(o, torch.Tensor) else None
        for o, want in zip(outputs, wanted)
    ]


# -- CPU fast paths: moving elements through a numpy view of the tensor's memory ------------------

# dtypes whose element arithmetic numpy does exactly as torch (finite differences move elements)
_NUMPY_ARITHMETIC = (torch.float64, torch.complex128)


def _plain(data: torch.Tensor) -> bool:
    """Whether ``data.numpy()`` is a view of its elements in order (a CPU tensor, contiguous, no
    lazy conjugation or negation)."""
    return data.device.type == "cpu" and data.is_contiguous() and not (data.is_conj() or data.is_neg())


def _element_view(data: torch.Tensor) -> np.ndarray | None:
    """The flat numpy view one element moves through, or None (moved with torch)."""
    if data.dtype in _NUMPY_ARITHMETIC and _plain(data):
        return data.numpy().reshape(-1)
    return None


def _direction_view(data: torch.Tensor) -> np.ndarray | None:
    """The flat numpy view a direction moves through, or None. Only real double inputs: torch
    adds a real step exactly as numpy does (complex steps are left to torch: its add multiplies
    the step by alpha=1, which can flip the sign of a zero component)."""
    if data.dtype == torch.float64 and _plain(data):
        return data.numpy().reshape(-1)
    return None


def _numpy_perturbed(func: Callable, inputs: tuple, outputs: Sequence[bool], flat: np.ndarray) -> Evaluate:
    wanted = list(outputs)

    def evaluate(k: int, delta: complex) -> Outputs:
        original = flat[k]
        flat[k] = original + delta
        try:  # copy the outputs before restoring: an output may be a view of the input
            return wanted_numpy(call(func, inputs), wanted)
        finally:
            flat[k] = original

    return evaluate


def _numpy_moved(func: Callable, inputs: tuple, outputs: Sequence[bool], flat: np.ndarray, step: np.ndarray) -> Outputs:
    original = flat.copy()
    np.add(original, step, out=flat)
    try:  # copy the outputs before restoring: an output may be a view of the input
        return wanted_numpy(call(func, inputs), outputs)
    finally:
        flat[:] = original
