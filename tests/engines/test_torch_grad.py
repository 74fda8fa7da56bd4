"""Pullbacks through autograd's engine (``distcheck.engines.torch_grad``): the same gradients as
``torch.autograd.grad`` wherever it is used, torch's own errors and dispatch elsewhere, and no
import of sympy on the way (torch's validation imports it on first use)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from distcheck.engines import get_engine
from distcheck.engines.torch_grad import grad


def _reference(outputs, inputs, grad_outputs, create_graph=False):
    return torch.autograd.grad(
        outputs, inputs, grad_outputs, retain_graph=True, create_graph=create_graph, allow_unused=True
    )


def _same(ours, theirs) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def _graph(dtype):
    x = torch.randn(3, 4, dtype=dtype, requires_grad=True)
    y = torch.randn(4, dtype=dtype, requires_grad=True)
    unused = torch.randn(2, dtype=dtype, requires_grad=True)
    outputs = [(x * y).sin(), (x @ y).exp()]
    grad_outputs = [torch.randn_like(o) for o in outputs]
    return outputs, [x, y, unused], grad_outputs


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("create_graph", [False, True])
def test_the_gradients_are_torchs(dtype, create_graph):
    torch.manual_seed(0)
    outputs, inputs, grad_outputs = _graph(dtype)
    ours = grad(outputs, inputs, grad_outputs, create_graph)
    _same(ours, _reference(outputs, inputs, grad_outputs, create_graph))
    assert ours[2] is None  # an input the outputs do not use
    if create_graph:  # differentiable again, as torch's: the second derivatives agree too
        x = inputs[0]
        first = [g for g in ours[:2]]
        again = [torch.ones_like(g) for g in first]
        _same(grad(first, [x], again), _reference(first, [x], again))
    else:
        assert all(g is None or g.grad_fn is None for g in ours)


def test_a_graph_serves_many_pullbacks():
    """The graph is retained: a second pullback of the same outputs gives the same gradients."""
    outputs, inputs, grad_outputs = _graph(torch.float64)
    _same(grad(outputs, inputs, grad_outputs), grad(outputs, inputs, grad_outputs))


def test_batched_through_the_engines_vmap_as_torchs():
    """Rows of a Jacobian in one call: the engine's (legacy) vmap over the pullback, as torch's
    batched grad-outputs; the same rows as one pullback each."""
    torch.manual_seed(1)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    out = x.sin() * x
    rows = torch.eye(5, dtype=torch.float64)
    batched = get_engine("torch").vmap(lambda g: grad([out], [x], [g])[0], rows)
    batched = batched[0] if isinstance(batched, tuple) else batched
    expected = torch.stack([_reference([out], [x], [row])[0] for row in rows])
    assert torch.equal(batched, expected)


def test_a_grad_output_unlike_its_output_gets_torchs_error():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = x * 2
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        grad([out], [x], [torch.ones(4, dtype=torch.float64)])
    with pytest.raises(RuntimeError, match="Mismatch in dtype"):
        grad([out], [x], [torch.ones(3, dtype=torch.complex128)])


class Logged(torch.Tensor):
    """A tensor subclass whose torch functions are seen (``torch.autograd.grad`` dispatches to it)."""

    seen: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Logged.seen.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_tensor_subclass_goes_through_torchs_dispatch():
    Logged.seen.clear()
    x = torch.randn(3, dtype=torch.float64).as_subclass(Logged).requires_grad_()
    out = x * 3
    (g,) = grad([out], [x], [torch.ones(3, dtype=torch.float64)])
    assert "grad" in Logged.seen
    assert torch.equal(g.as_subclass(torch.Tensor), torch.full((3,), 3.0, dtype=torch.float64))


def test_checks_in_a_fresh_process_import_no_sympy():
    """torch's own gradcheck imports sympy (through its grad-outputs' validation); distcheck's
    checks, fast and slow, first and second order, do not."""
    code = (
        "import sys, torch, distcheck\n"
        "x = torch.randn(4, dtype=torch.float64, requires_grad=True)\n"
        "assert distcheck.gradcheck(torch.sin, (x,))\n"
        "assert distcheck.gradcheck(torch.sin, (x,), fast_mode=True)\n"
        "assert distcheck.gradgradcheck(torch.sin, (x,))\n"
        "print(sorted(m for m in sys.modules if m in ('sympy', 'torch.fx.experimental.symbolic_shapes')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
