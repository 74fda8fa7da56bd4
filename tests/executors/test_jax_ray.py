"""JAX checks on Ray: Jacobian columns as Ray tasks give bitwise the serial numbers and verdicts.

The checked functions are module-level (Ray pickles them by reference; ``jax.custom_vjp`` objects
do not pickle, so the catalogue's are called from module-level functions). Importing this module
turns JAX's 64-bit mode on in the test process; the workers get it with each check (the JAX
engine's state: test_jax_x64_ray.py checks it in workers of a Ray of their own).
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import distcheck  # noqa: E402
from distcheck.executors.ray_executor import RayExecutor  # noqa: E402
from distcheck.executors.serial import SerialExecutor  # noqa: E402
from distcheck.options import Batching, CheckOptions  # noqa: E402
from distcheck.plan.chunking import Whole  # noqa: E402
from tests.catalogue import jax_functions as jf  # noqa: E402
from tests.executors.test_ray_executor import Pieces, _jacobians, _same, _unit_outcomes  # noqa: E402

# Ray starts its processes after JAX has started its threads: harmless here (the children exec)
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def sin_times(x, y):
    return jnp.sin(x) * y


def complex_function(z, x):
    return z * jnp.sin(z) * x


def wrong_scale(x):
    return jf.WrongScale(x)


def noisy_backward(x):
    return jf.NoisyBackward(x)


jitted = jax.jit(sin_times)


def _inputs(*shapes, complex_first=False):
    rng = np.random.default_rng(len(shapes))
    made = [rng.standard_normal(shape) for shape in shapes]
    if complex_first:
        made[0] = made[0] + 1j * rng.standard_normal(shapes[0])
    return tuple(jnp.asarray(a) for a in made)


CHECKS = [
    pytest.param(sin_times, _inputs((3, 4), (3, 4)), {}, id="sin_times"),
    pytest.param(jitted, _inputs((3, 4), (3, 4)), {}, id="jitted"),
    pytest.param(complex_function, _inputs((5,), (5,), complex_first=True), {}, id="complex"),
    pytest.param(wrong_scale, _inputs((6,)), {}, id="wrong_custom_vjp"),
    pytest.param(sin_times, _inputs((3, 4), (3, 4)), {"fast_mode": True}, id="fast"),
    pytest.param(complex_function, _inputs((4,), (4,), complex_first=True), {"check_forward_ad": True}, id="forward"),
    pytest.param(sin_times, _inputs((2, 3), (2, 3)), {"check_batched_grad": True}, id="batched"),
]


@pytest.fixture(scope="module")
def pieces(ray_cluster):
    return RayExecutor(policy=Pieces(2))  # every two Jacobian columns (rows) a Ray task


@pytest.mark.parametrize(("func", "inputs", "options"), CHECKS)
def test_every_number_is_bitwise_the_serial_one(func, inputs, options, pieces):
    # batched wherever the engine can, untimed: a timed choice may plan the two runs apart
    options = CheckOptions(**{"vectorize": Batching(measure=False, min_seconds=0), **options})
    serial = _unit_outcomes(func, inputs, options, SerialExecutor())
    assert _same(_unit_outcomes(func, inputs, options, RayExecutor(policy=Whole())), serial)  # the same units
    reference, ours = _jacobians(func, inputs, options, SerialExecutor()), _jacobians(func, inputs, options, pieces)
    assert type(ours) is type(reference)
    if isinstance(reference, tuple):  # the check failed before assembling: the same exception
        assert ours == reference
        return
    assert ours.keys() == reference.keys() and all(_same(ours[k], reference[k]) for k in reference)


@pytest.mark.parametrize(("func", "inputs", "options"), CHECKS)
def test_verdicts_and_messages_are_the_serial_ones(func, inputs, options, pieces):
    def outcome(executor):
        try:
            return distcheck.gradcheck(func, inputs, executor=executor, **options)
        except distcheck.GradcheckError as e:
            return str(e)

    assert outcome(pieces) == outcome(SerialExecutor())


def test_gradgradcheck_and_nondeterminism_on_ray(pieces):
    assert distcheck.gradgradcheck(complex_function, _inputs((3,), (3,), complex_first=True), executor=pieces)
    with pytest.raises(distcheck.GradcheckError, match="Backward is not reentrant"):
        distcheck.gradcheck(noisy_backward, _inputs((4,)), executor=pieces)
