"""Batching rules that distcheck gives torch's vmap for operations that have none, in force only
inside distcheck's own batched evaluations (:func:`inside`); elsewhere such an operation does
what torch's vmap does without them (the operation's decomposition, whose parts torch batches or
loops over item by item).

``ctc_loss`` (both overloads: lengths as lists or as tensors). Its loss for one sequence (one
index ``n`` of the batch dimension of ``log_probs``) depends on that sequence's slice of
``log_probs`` and its own target and lengths only, and torch computes each sequence alone. A
batch of perturbed copies of one input, as a numerical Jacobian block is, differs from copy to
copy in a few sequences only. So each sequence is computed once for every bitwise-distinct slice
it has across the copies (one ``_ctc_loss`` call for all of them), and every copy's losses are
gathered from those: each value is the one torch computes for that slice, the reduction over
sequences is torch's (``zero_infinity``, the mean over target lengths, the sum). A batch whose
input records gradients (forward or backward), or of a shape the rule does not cover (unbatched
``log_probs``, concatenated or batched targets, batched lengths), is torch's instead: a gathered
value would send its gradient to the copy it was gathered from.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

import torch
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

_functorch = torch._C._functorch
_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}  # at::Reduction

_active: contextvars.ContextVar[bool] = contextvars.ContextVar("distcheck_batching_rules", default=False)
_lock = threading.Lock()
_library: torch.library.Library | None = None


@contextlib.contextmanager
def inside():
    """distcheck's rules in force for the code inside (registered with torch on first use)."""
    _install()
    token = _active.set(True)
    try:
        yield
    finally:
        _active.reset(token)


def _install() -> None:
    global _library
    with _lock:
        if _library is None:
            library = torch.library.Library("aten", "IMPL")
            library.impl("ctc_loss.IntList", _ctc_loss, "FuncTorchBatched")
            library.impl("ctc_loss.Tensor", _ctc_loss_tensor_lengths, "FuncTorchBatched")
            _library = library


def _ctc_loss_tensor_lengths(log_probs, targets, input_lengths, target_lengths, *rest):
    level = retrieve_current_functorch_interpreter().level()
    lengths = [_functorch._unwrap_batched(t, level) for t in (input_lengths, target_lengths)]
    if not _active.get() or any(dim is not None for _, dim in lengths):
        return _torchs(torch.ops.aten.ctc_loss.Tensor, log_probs, targets, input_lengths, target_lengths, *rest)
    return _ctc_loss(log_probs, targets, *(values.tolist() for values, _ in lengths), *rest)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    args = (log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)
    interpreter = retrieve_current_functorch_interpreter()
    level = interpreter.level()
    values, dim = _functorch._unwrap_batched(log_probs, level)
    plain_targets, targets_dim = _functorch._unwrap_batched(targets, level)
    covered = dim is not None and targets_dim is None and values.dim() == 4 and plain_targets.dim() == 2
    covered = covered and values.dtype in _BITS and reduction in _REDUCTIONS
    if not _active.get() or not covered or _records_gradients(values):
        return _torchs(torch.ops.aten.ctc_loss.IntList, *args)
    values = values.movedim(dim, 0)  # (copies, time, sequences, classes)
    sequences, copies, index = _distinct_sequences(values)
    computed = sequences.tolist()
    with interpreter.lower():
        losses, _ = torch.ops.aten._ctc_loss(
            values[copies, :, sequences, :].transpose(0, 1),
            plain_targets[sequences],
            [input_lengths[n] for n in computed],
            [target_lengths[n] for n in computed],
            blank,
            zero_infinity,
        )
    losses = losses[index]  # (copies, sequences)
    if zero_infinity:
        losses = torch.where(losses == float("inf"), losses.new_zeros(()), losses)
    if _REDUCTIONS[reduction] == "mean":
        losses = (losses / losses.new_tensor(target_lengths).clamp_min(1)).mean(dim=1)
    elif _REDUCTIONS[reduction] == "sum":
        losses = losses.sum(dim=1)
    return _functorch._add_batch_dim(losses, 0, level)


def _records_gradients(values: torch.Tensor) -> bool:
    """Whether ``values`` (an unwrapped batch) takes part in a derivative: a functorch transform
    below the vmap, autograd recording, or forward-mode AD."""
    if _functorch.is_functorch_wrapped_tensor(values):
        return True
    if torch.is_grad_enabled() and values.requires_grad:
        return True
    return torch.autograd.forward_ad.unpack_dual(values).tangent is not None


def _distinct_sequences(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For a batch of copies ``(copies, time, sequences, classes)``: the sequences to compute
    (their index ``n`` and the copy whose slice is computed) and, per (copy, n), which of them
    holds that copy's loss. A slice is shared only where it is bitwise equal to the computed one.
    Each sequence computes its slice in a reference copy (the first, or the first that differs
    from it where most copies differ from the first) and every slice that differs from it."""
    count, width, device = values.shape[0], values.shape[2], values.device
    bits = values.view(_BITS[values.dtype])
    reference = torch.zeros(width, dtype=torch.long, device=device)
    same = (bits == bits[:1]).all(dim=3).all(dim=1)  # (copies, sequences)
    for n in (same.sum(dim=0) * 2 < count).nonzero().flatten().tolist():
        reference[n] = int((~same[:, n]).nonzero()[0, 0])
        same[:, n] = (bits[:, :, n, :] == bits[reference[n], :, n, :]).all(dim=2).all(dim=1)
    own_copies, own_sequences = (~same).nonzero(as_tuple=True)
    every = torch.arange(width, device=device)
    sequences = torch.cat([every, own_sequences])
    copies = torch.cat([reference, own_copies])
    index = every.expand(count, width).clone()
    index[own_copies, own_sequences] = torch.arange(width, width + len(own_copies), device=device)
    return sequences, copies, index


def _torchs(op, *args):
    """What torch's vmap does without distcheck's rule: the operation's own decomposition, whose
    parts torch batches (``_ctc_loss`` item by item, through its per-item fallback, which keeps
    gradients and raises where that fallback is turned off)."""
    return op.decompose(*args)
