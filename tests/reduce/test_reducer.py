import pytest
import torch

import distcheck
from distcheck.check import plan_check
from distcheck.executors.serial import SerialExecutor, SerialResults
from distcheck.options import CheckOptions
from distcheck.plan.stages import JacobianComparison
from distcheck.plan.units import UnitResult
from distcheck.reduce.reducer import reduce
from tests.catalogue import torch_functions as tf


def _x(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()


class CountingExecutor(SerialExecutor):
    def __init__(self):
        super().__init__()
        self.ran = []

    def submit(self, subject, units):
        results = super().submit(subject, units)
        ran, get = self.ran, results.get

        def counting_get(index):
            ran.append(index)
            return get(index)

        results.get = counting_get
        return results


def test_serial_execution_stops_at_the_first_failure():
    executor = CountingExecutor()
    assert not distcheck.gradcheck(tf.WrongScale.apply, (_x(3),), raise_exception=False, executor=executor)
    assert executor.ran == [0, 1]  # the numerical and analytical units; no auxiliary check ran


class ScrambledResults(SerialResults):
    """Every unit's result computed up front, in reverse order (as a parallel executor might)."""

    def __init__(self, subject, units):
        super().__init__(subject, units, threads=1)
        for index in reversed(range(len(units))):
            self.get(index)


def test_the_first_failure_in_reference_order_wins_whatever_finished_first():
    # Both the Jacobian comparison and the zero-grad check fail; the Jacobian comes first.
    engine, plan = plan_check(tf.OneWrongElement.apply, (_x(5),), CheckOptions(), SerialExecutor())
    with pytest.raises(distcheck.GradcheckError, match="Jacobian mismatch"):
        reduce(plan, ScrambledResults(plan.subject, plan.units), CheckOptions(), engine)


def test_unit_exceptions_are_reraised_as_they_are():
    with pytest.raises(ValueError, match="user function failed"):
        distcheck.gradcheck(tf.raises_value_error, (_x(3),))


def test_reentrancy_uses_nondet_tol():
    engine, plan = plan_check(tf.NoisyBackward.apply, (_x(4),), CheckOptions(), SerialExecutor())
    results = SerialResults(plan.subject, plan.units, 1)
    with pytest.raises(distcheck.GradcheckError, match="not reentrant"):
        reduce(plan, results, CheckOptions(), engine)
    reduce(plan, SerialResults(plan.subject, plan.units, 1), CheckOptions(nondet_tol=1e-6), engine)


def test_wrong_element_message_names_input_and_output_elements():
    with pytest.raises(distcheck.GradcheckError) as failure:
        distcheck.gradcheck(tf.OneWrongElement.apply, (_x(2, 3),))
    message = str(failure.value)
    assert "input 0 element (1, 0) (Jacobian row 3)" in message
    assert "output 0 element (1, 0) (column 3)" in message
    assert "1 of 36 elements outside the tolerance" in message


def test_error_is_also_torchs_gradcheck_error():
    import importlib

    torch_error = importlib.import_module("torch.autograd.gradcheck").GradcheckError
    with pytest.raises(torch_error):
        distcheck.gradcheck(tf.WrongScale.apply, (_x(3),))


def test_an_error_from_another_process_carries_its_traceback_as_a_note():
    import pickle

    error = pickle.loads(pickle.dumps(ValueError("boom")))  # as it arrives from a worker: no __traceback__
    result = UnitResult(error=error, traceback="Traceback (most recent call last): ... ValueError: boom", worker="w1")
    with pytest.raises(ValueError) as raised:
        result.unwrap()
    assert any("ValueError: boom" in note and "w1" in note for note in raised.value.__notes__)


def test_jacobian_stage_lists_every_input_and_output():
    _, plan = plan_check(lambda x, y: (x * y, x + y), (_x(2), _x(2)), CheckOptions(), SerialExecutor())
    stage = plan.stages[0]
    assert isinstance(stage, JacobianComparison)
    assert len(stage.inputs) == 2 and len(stage.outputs) == 2
