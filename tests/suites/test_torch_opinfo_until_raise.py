"""torch-opinfo's tests that assert a raise around their whole loop over the samples
(test_fn_fail_gradgrad; test_forward_mode_AD, test_inplace_forward_mode_AD and
test_fn_fwgrad_bwgrad of an op without forward AD): one case per test, sample 0, whose call
checks the samples in order until one raises, as PyTorch's test passes at the first sample that
raises. Checked through the suite (list, build, judge) on op_db ops and on a made-up op whose
samples raise or not as each test needs, outcome for outcome with PyTorch's own test helpers."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.testing._internal.common_utils import TestGradients
from torch.testing._internal.opinfo.core import SampleInput

from distcheck.case.judge import distcheck_checker, judge
from distcheck.executors.serial import SerialExecutor
from distcheck.records.case_record import FAIL, PASS
from distcheck.reports.pytorch_junit import aggregate
from distcheck.suites import CaseId, Selection, get_suite
from distcheck.suites.torch_opinfo import database
from distcheck.suites.torch_opinfo.calls import FORWARD_AD_UNSUPPORTED, GRADGRAD_UNSUPPORTED
from distcheck.suites.torch_opinfo.database import op_named
from distcheck.suites.torch_opinfo.pytorch_names import OP_DB
from distcheck.suites.torch_opinfo.status import until_raise

FORWARD_KINDS = ("fwgrad", "inplace_fwgrad", "fwgrad_bwgrad")
FAKE = "distcheck_until_raise_fake"


@pytest.fixture(scope="module")
def suite():
    return get_suite("torch-opinfo")


def _verdict(suite, case: CaseId) -> str:
    return judge(suite.build(case), distcheck_checker(SerialExecutor()))[0]


def _listed(suite, op: str, checks=FORWARD_KINDS, dtype: str = "float64") -> dict[str, list[CaseId]]:
    """The runnable cases of ``op`` by check kind (not the tests decided unrun)."""
    cases: dict[str, list[CaseId]] = {}
    for info in suite.cases(Selection(checks=checks, ops=(op,), dtypes=(dtype,))):
        if info.id.sample is not None:
            cases.setdefault(info.id.check, []).append(info.id)
    return cases


# -- op_db ops without forward AD ------------------------------------------------------------


def test_an_op_without_forward_ad_is_one_case_per_test_and_passes(suite):
    op = op_named("nn.functional.multilabel_margin_loss")  # 6 samples, none with forward AD
    assert not op.supports_forward_ad and len(suite._listing(op, torch.float64)) > 1
    cases = _listed(suite, op.full_name)
    assert set(cases) == {"fwgrad", "fwgrad_bwgrad"}  # inplace_fwgrad: skipped (no in-place autograd)
    for check, ids in cases.items():
        assert [c.sample for c in ids] == [0], check
        built = suite.build(ids[0])
        assert built.expected_error == FORWARD_AD_UNSUPPORTED and built.expected_failure is None
        assert [c.function for c in built.calls] == ["call"]
        assert _verdict(suite, ids[0]) == PASS
    with pytest.raises(LookupError, match="one case, its sample 0"):
        suite.build(CaseId("torch-opinfo", op.full_name, "float64", "fwgrad", 1))


def test_the_in_place_kind_of_an_op_without_forward_ad(suite):
    (case,) = _listed(suite, "index_reduce.mean", ("inplace_fwgrad",))["inplace_fwgrad"]
    assert case.sample == 0
    built = suite.build(case)
    assert built.func.inplace and built.expected_error == FORWARD_AD_UNSUPPORTED
    assert _verdict(suite, case) == PASS


def test_only_the_tests_that_expect_the_raise_are_one_case(suite):
    """hardsigmoid has forward AD but no forward-over-reverse: its fwgrad and inplace_fwgrad
    stay a case per sample, its fwgrad_bwgrad is one case; test_inplace_grad of an op without
    in-place autograd asserts its raise sample by sample: a case per sample."""
    cases = _listed(suite, "nn.functional.hardsigmoid")
    assert len(cases["fwgrad"]) == len(cases["inplace_fwgrad"]) == 3
    assert [c.sample for c in cases["fwgrad_bwgrad"]] == [0]
    acosh = op_named("acosh")
    assert not acosh.supports_inplace_autograd and not until_raise(acosh, "inplace_grad")
    assert len(_listed(suite, "acosh", ("inplace_grad",))["inplace_grad"]) > 1


def test_expected_failures_stay_expected(suite):
    (case,) = _listed(suite, "scatter_reduce.prod", ("fwgrad",))["fwgrad"]
    built = suite.build(case)
    assert case.sample == 0 and built.expected_error == FORWARD_AD_UNSUPPORTED
    assert "expected failure" in built.expected_failure


def test_fail_gradgrad_is_unchanged(suite):
    (case,) = _listed(suite, "cdist", ("fail_gradgrad",))["fail_gradgrad"]
    built = suite.build(case)
    assert case.sample == 0 and built.expected_error == GRADGRAD_UNSUPPORTED
    assert built.func.check == "fail_gradgrad" and not built.func.inplace
    assert _verdict(suite, case) == PASS


# -- a made-up op: which samples raise is chosen per test --------------------------------------


def _function(x, *, raising=False):
    return torch.cdist(x, x) if raising else torch.sinh(x)  # cdist has no forward AD


def _inplace(x, *, raising=False):
    return x.copy_(torch.cdist(x, x)) if raising else x.sinh_()


def _fake_op(kinds: list[tuple[bool, bool]]):
    """An op of op_db's shape: sample k is ``(raising, broadcasts_input)`` of ``kinds``."""

    def sample_inputs(op, device, dtype, requires_grad, **kwargs):
        for raising, broadcasts in kinds:
            x = torch.rand(3, 3, device=device, dtype=dtype, requires_grad=requires_grad)
            yield SampleInput(x, kwargs={"raising": raising}, broadcasts_input=broadcasts)

    op = copy.copy(op_named("sinh"))
    op.name, op.op, op.inplace_variant, op.sample_inputs_func = FAKE, _function, _inplace, sample_inputs
    op.supports_forward_ad = op.supports_fwgrad_bwgrad = False
    op.decorators = ()
    return op


@pytest.fixture
def install(monkeypatch):
    """Puts a made-up op in the suite's op table (op_db) for one test."""
    from distcheck.suites.torch_opinfo import samples

    def _install(kinds):
        op = _fake_op(kinds)
        tables, databases = database._tables()
        monkeypatch.setitem(tables, FAKE, op)
        monkeypatch.setitem(databases, FAKE, OP_DB)
        for key in [k for k in samples._cache if k[0] == FAKE]:  # a list of an earlier made-up op
            del samples._cache[key]
        return op

    yield _install
    for key in [k for k in samples._cache if k[0] == FAKE]:
        del samples._cache[key]


class _PyTorchTests(TestGradients):
    """PyTorch's bodies of the three tests for an op without forward AD (test_ops_fwd_gradients.py)."""

    def forward(self, op, inplace: bool):
        variant = self._get_safe_inplace(op.get_inplace()) if inplace else op.get_op()
        kwargs = dict(check_forward_ad=True, check_backward_ad=False, check_batched_grad=False)
        batched = op.check_inplace_batched_forward_grad if inplace else op.check_batched_forward_grad
        with self.assertRaisesRegex(NotImplementedError, FORWARD_AD_UNSUPPORTED.pattern):
            self._grad_test_helper("cpu", torch.float64, op, variant, **kwargs, check_batched_forward_grad=batched)

    def fwgrad_bwgrad(self, op):
        with self.assertRaisesRegex(NotImplementedError, FORWARD_AD_UNSUPPORTED.pattern):
            self._check_helper("cpu", torch.float64, op, op.get_op(), "fwgrad_bwgrad")


def _pytorch_outcome(op, check: str) -> str:
    test = _PyTorchTests()
    try:
        if check == "fwgrad_bwgrad":
            test.fwgrad_bwgrad(op)
        else:
            test.forward(op, inplace=check == "inplace_fwgrad")
    except AssertionError:
        return FAIL
    return PASS


def _outcome(suite, check: str) -> tuple[str, list[int | None]]:
    """The made-up op's test of ``check`` as distcheck decides it: the outcome of its cases,
    and their sample indices."""
    cases = _listed(suite, FAKE, (check,)).get(check, [])
    return aggregate(_verdict(suite, case) for case in cases), [case.sample for case in cases]


@pytest.mark.parametrize("check", FORWARD_KINDS)
@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ([(False, False), (True, False), (False, False)], PASS),  # sample 1 raises: the test passes
        ([(True, False), (False, False)], PASS),
        ([(False, False), (False, False)], FAIL),  # none raises: the test fails
    ],
)
@pytest.mark.filterwarnings("ignore")
def test_the_first_raising_sample_ends_the_test(suite, install, check, kinds, expected):
    op = install(kinds)
    assert until_raise(op, check)
    outcome, listed = _outcome(suite, check)
    assert outcome == expected == _pytorch_outcome(op, check)
    assert listed == [0]  # one case


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ([(True, True), (False, False)], FAIL),  # the raising sample broadcasts: left out
        ([(True, True), (False, False), (True, False)], PASS),
        ([(True, True)], FAIL),  # every sample left out: nothing raises
    ],
)
@pytest.mark.filterwarnings("ignore")
def test_the_in_place_kind_leaves_out_broadcasting_samples(suite, install, kinds, expected):
    op = install(kinds)
    outcome, listed = _outcome(suite, "inplace_fwgrad")
    assert outcome == expected == _pytorch_outcome(op, "inplace_fwgrad")
    assert listed == [0]  # one case, sample 0 even where it broadcasts
    # the plain kind checks every sample: the broadcasting one raises
    assert _outcome(suite, "fwgrad") == (PASS, [0]) and _pytorch_outcome(op, "fwgrad") == PASS


@pytest.mark.filterwarnings("ignore")
def test_each_sample_is_seeded_as_its_own_case(suite, install, monkeypatch):
    from distcheck.suites.torch_opinfo import samples
    from distcheck.suites.torch_opinfo.suite import case_seed

    install([(False, False), (False, False), (True, False)])
    (case,) = _listed(suite, FAKE, ("fwgrad_bwgrad",))["fwgrad_bwgrad"]
    built = suite.build(case)
    seeds: list[int] = []
    monkeypatch.setattr(samples, "seed_everything", seeds.append)
    assert judge(built, distcheck_checker(SerialExecutor()))[0] == PASS
    each = [case_seed(CaseId("torch-opinfo", FAKE, "float64", "fwgrad_bwgrad", k)) for k in range(3)]
    # samples 0 and 1: gradgradcheck with contiguous, then non-contiguous grad-outputs; sample 2
    # raises in its first call
    assert seeds == [each[0], each[0], each[1], each[1], each[2]]


def test_the_made_up_op_is_gone_after_its_test():
    assert FAKE not in database.op_table()
