"""The torch engine's shared reference call: one call of the function serves every backward
pass and check of a gradcheck, as in torch's own gradcheck — never for changed inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import distcheck
from distcheck.engines import get_engine
from distcheck.engines.reference import forget_default, reference_call
from distcheck.engines.torch_perturb import outputs_moved
from tests.catalogue.torch_functions import WrongScale

ENGINE = get_engine("torch")


class Counted:
    """``torch.sin`` (or a wrong backward) that counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return x.sin() * 2, x.cos()


def _calls(check, func, inputs, **kwargs) -> int:
    func.calls = 0
    check(func, inputs, **kwargs)
    return func.calls


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"fast_mode": True}, {"check_batched_grad": True}, {"fast_mode": True, "check_batched_grad": True}],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
def test_a_check_calls_the_function_as_often_as_torch_does_less_what_one_call_serves(kwargs, dtype, check):
    """The auxiliary checks use the first call, as torch's (gradgradcheck: each call is a backward
    pass) — and so does the undefined-grad check, for which torch calls the function again: once
    with every grad-output undefined, then once per output with several outputs (``Counted`` has
    two: 3 calls; gradgradcheck's function has one, the gradient of x: 1 call). Complex outputs:
    torch evaluates the function again for the finite differences of the real part after those
    of the imaginary part, at the same points; distcheck evaluates it once for both. Here every
    input of the checked function is complex (gradgradcheck's: x and the two grad-outputs, 5
    elements each), and each perturbation is 4 evaluations (±eps, ±eps·1j): 4 per element in
    slow mode, 4 per input in fast mode (one random direction)."""
    x = torch.linspace(0.1, 0.9, 5, dtype=torch.float64).to(dtype).requires_grad_()
    func = Counted()
    ours = _calls(getattr(distcheck, check), func, (x,), **kwargs)
    theirs = _calls(getattr(torch.autograd, check), func, (x,), **kwargs)
    inputs = 3 if check == "gradgradcheck" else 1
    undefined = 1 if check == "gradgradcheck" else 1 + 2
    parts = 0 if dtype == torch.float64 else 4 * inputs * (1 if kwargs.get("fast_mode") else 5)
    assert theirs - ours == undefined + parts
    without = {**kwargs, "check_undefined_grad": False}  # torch's extra calls are the undefined-grad check's
    assert _calls(getattr(torch.autograd, check), func, (x,), **without) == theirs - undefined
    assert _calls(getattr(distcheck, check), func, (x,), **without) == ours


def test_the_reference_call_is_shared_only_while_nothing_changes():
    x = torch.linspace(0.1, 0.9, 5, dtype=torch.float64).requires_grad_()
    y = x.detach().clone().requires_grad_()
    func = Counted()
    first = reference_call(ENGINE, func, (x,))
    assert reference_call(ENGINE, func, (x,)) is first and func.calls == 1
    assert reference_call(ENGINE, func, (y,)) is not first and func.calls == 2  # other input objects
    assert reference_call(ENGINE, Counted(), (y,)) is not first  # another function
    second = reference_call(ENGINE, func, (x,))
    with torch.no_grad():
        x.mul_(1.0)  # changed in place: its version counter moves
    assert reference_call(ENGINE, func, (x,)) is not second
    forget_default()
    calls = func.calls
    reference_call(ENGINE, func, (x,))
    assert func.calls == calls + 1


def test_a_check_keeps_nothing_when_it_ends():
    x = torch.linspace(0.1, 0.9, 5, dtype=torch.float64).requires_grad_()
    func = Counted()
    assert distcheck.gradcheck(func, (x,))
    calls = func.calls
    reference_call(ENGINE, func, (x,))
    assert func.calls == calls + 1  # the check's kept outputs were dropped


def test_backward_passes_of_the_shared_call_see_the_restored_inputs():
    """Finite differences perturb the inputs in place between the reference call and the
    backward passes: a function whose backward reads its saved input still checks out, and a
    wrong backward is still caught."""
    x = torch.linspace(0.1, 0.9, 6, dtype=torch.float64).reshape(2, 3).requires_grad_()
    assert distcheck.gradcheck(lambda t: (t * t).sum(dim=0), (x,), check_batched_grad=True)

    with pytest.raises(distcheck.GradcheckError, match="Jacobian mismatch"):
        distcheck.gradcheck(WrongScale.apply, (x,))  # its backward reads its saved input


@pytest.mark.parametrize(
    "dtype, delta",
    [(torch.float64, 1e-6), (torch.float64, -1e-6)] + [(torch.complex128, d) for d in (1e-6, -1e-6, 1e-6j, -1e-6j)],
)
def test_finite_differences_move_elements_through_numpy_exactly_as_through_torch(dtype, delta):
    """Double inputs are perturbed through a numpy view of their memory (fast); the outputs
    are bitwise those of moving the torch element, and the input is restored bitwise. (A
    real input moves along real steps only.)"""
    x = (torch.randn(3, 4, dtype=dtype) * 1e3).requires_grad_()
    before = x.detach().clone()

    def func(t):
        return t * 3.0, t[1:]  # the second output is a view of the input

    evaluate = ENGINE.perturbed_evaluator(func, (x,), 0, [True, True])
    flat = x.data.view(-1)
    for k in (0, 5, 11):
        fast = evaluate(k, delta)
        slow = outputs_moved(func, (x,), [True, True], flat[k], delta)
        for a, b in zip(fast, slow):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        assert torch.equal(x.detach(), before)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_fast_mode_directions_move_a_double_input_through_numpy_exactly_as_through_torch(sign):
    """A real double input moves along fast mode's random direction through a numpy view of
    its memory: the outputs are bitwise those of moving it with torch, the input is restored
    bitwise, and zeros keep their sign."""
    x = (torch.randn(3, 4, dtype=torch.float64) * 1e3).requires_grad_()
    with torch.no_grad():
        x[0, 0], x[0, 1] = 0.0, -0.0
    before = x.detach().clone()
    delta = sign * torch.rand(12, dtype=torch.float64).numpy() * 1e-6
    delta[:2] = -0.0

    def func(t):
        return t * 3.0, t[1:]  # the second output is a view of the input

    fast = ENGINE.direction_evaluator(func, (x,), 0, [True, True])(delta)
    slow = outputs_moved(func, (x,), [True, True], x.data, torch.from_numpy(delta).reshape(3, 4))
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert x.detach().numpy().tobytes() == before.numpy().tobytes()


def test_forward_mode_keeps_a_zero_dim_complex_input_zero_dim():
    # masked_fill takes only a 0-dim value: forward mode checks it through its real and imaginary parts
    mask = torch.tensor([True, False, True])
    x = torch.randn(3, dtype=torch.complex128, requires_grad=True)
    value = torch.tensor(1 + 2j, dtype=torch.complex128, requires_grad=True)
    options = {"check_forward_ad": True, "check_backward_ad": False, "check_undefined_grad": False}
    assert distcheck.gradcheck(lambda x, v: x.masked_fill(mask, v), (x, value), **options)
    assert distcheck.gradgradcheck(
        lambda v: (v * v).sum(), (value,), check_fwd_over_rev=True, check_rev_over_rev=False, check_undefined_grad=False
    )


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "transposed"])
def test_a_read_only_block_formats_without_a_warning(contiguous):
    # Ray returns read-only arrays: torch.from_numpy warns of them (an error under -W error),
    # which plain pytest, whose arrays are writable, never does.
    import warnings

    import numpy as np

    block = np.arange(6, dtype=np.float64).reshape(2, 3)
    expected = ENGINE.format_block(block if contiguous else block.T)
    block.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ENGINE.format_block(block if contiguous else block.T) == expected
    assert not block.flags.writeable


def test_read_only_arrays_become_tensors_without_a_warning():
    """Arrays that Ray returns are read-only: torch.from_numpy would warn (an error under -W error)."""
    import warnings

    from distcheck.engines.torch_tensors import tensor_of

    array = np.arange(6.0).reshape(2, 3)
    array.flags.writeable = False
    like = torch.zeros(2, 3, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(get_engine("torch").from_numpy(array, like), torch.arange(6.0).reshape(2, 3))
        assert tensor_of(array).tolist() == array.tolist()
    writable = np.arange(3.0)
    assert tensor_of(writable).data_ptr() == writable.ctypes.data  # no copy when it can be shared


def _bits(t: torch.Tensor) -> bytes:
    """Every bit of ``t``'s values (the signs of zeros and NaN payloads included)."""
    t = t.resolve_conj().resolve_neg().contiguous()
    return (torch.view_as_real(t) if t.is_complex() else t).numpy().tobytes()


@pytest.mark.parametrize("part", ["real", "imag"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_joining_a_dual_part_gives_what_torchs_forward_ad_gives_the_expression(part, dtype):
    """Forward-mode checks of complex inputs join each part, a dual tensor, with the constant
    other part: the primal and tangent are bit for bit those of torch's forward AD of the
    expression (``part + other * 1j``, ``other + part * 1j``) for every combination of signed
    zeros, infinities, NaN, subnormal and ordinary values of part, tangent and other, on a fresh
    tensor (not a view) laid out as the expression's."""
    from distcheck.engines.torch_engine import _joined_dual
    from distcheck.kinds import Part

    fw = torch.autograd.forward_ad
    inf, nan = float("inf"), float("nan")
    special = torch.tensor([0.0, -0.0, 1.0, -2.5, inf, -inf, nan, 5e-324, -1e308], dtype=dtype)
    n = len(special)
    grid = [g.clone() for g in torch.meshgrid(special, special, special, indexing="ij")]  # every combination
    for shape in [(n, n, n), (n**3,), ()]:
        value, tangent, other = (g.reshape(shape) if shape else g[1, 4, 6] for g in grid)
        with fw.dual_level():
            dual = fw.make_dual(value, torch.zeros_like(value))
            fw.unpack_dual(dual).tangent.copy_(tangent)
            expected = dual + other * 1j if part == "real" else other + dual * 1j
            joined = ENGINE.complex_join(dual, other, Part(part))
            assert _joined_dual(dual, other, Part(part)) is not None  # not the expression itself
            (p1, t1), (p2, t2) = fw.unpack_dual(expected), fw.unpack_dual(joined)
            assert _bits(p2) == _bits(p1) and _bits(t2) == _bits(t1)
            assert (p2.dtype, p2.shape, p2.stride(), t2.stride()) == (p1.dtype, p1.shape, p1.stride(), t1.stride())
            assert not joined._is_view() and not joined.requires_grad


def test_fast_mode_vectors_are_torchs_draws_each_time_and_each_callers_own():
    """Fast mode's unit vectors are those of torch's gradcheck (``_make_vectors``: a fresh
    generator, one vector per input, two for a complex one, then one per output) whether drawn
    or kept from an earlier check of the same sizes; a caller that changes its copies changes
    nothing for the next."""
    from torch.autograd.gradcheck import _make_vectors

    x, z = torch.zeros(3, 4, dtype=torch.float64), torch.zeros(5, dtype=torch.complex128)
    out = torch.zeros(7, dtype=torch.float64)
    all_v, all_u, _ = _make_vectors([x, z], [out], use_forward_ad=False)
    expected = [all_u[0], *all_u[1], *all_v]
    dtypes = [np.dtype(np.float64)] * 4  # a complex input's directions are real
    for _ in range(3):
        drawn = ENGINE.random_unit_vectors([12, 5, 5, 7], dtypes)
        assert [d.tobytes() for d in drawn] == [e.numpy().tobytes() for e in expected]
        for d in drawn:
            d[:] = 0.5  # the caller's own copies
