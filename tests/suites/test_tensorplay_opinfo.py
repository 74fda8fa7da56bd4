"""Suite tensorplay-opinfo: torch-opinfo's cases on tensorplay's functions of the same names.

Ids and statuses, op lookup and translation of OpInfo's Python helpers, conversion of the
samples, fingerprints and seeding, and a few cases end to end through distcheck, compared with
distcheck's verdict on the torch-opinfo case of the same id."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

tp = pytest.importorskip("tensorplay")
torch = pytest.importorskip("torch")

from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402

from distcheck.case.judge import distcheck_checker, judge  # noqa: E402
from distcheck.engines.tensorplay_engine import to_numpy  # noqa: E402
from distcheck.executors.serial import SerialExecutor  # noqa: E402
from distcheck.suites import CaseId, Selection, get_suite, suite_names  # noqa: E402
from distcheck.suites.tensorplay_opinfo import helpers, lookup  # noqa: E402
from distcheck.suites.tensorplay_opinfo.calls import convert  # noqa: E402
from distcheck.suites.tensorplay_opinfo.convert import Converter, Unconvertible  # noqa: E402
from distcheck.suites.tensorplay_opinfo.fingerprint import fingerprint  # noqa: E402
from distcheck.suites.tensorplay_opinfo.status import NO_FORWARD_AD, tensorplay_status  # noqa: E402
from distcheck.suites.tensorplay_opinfo.translate import Untranslatable, translate  # noqa: E402
from distcheck.suites.torch_opinfo.database import op_named  # noqa: E402

F64, C128 = torch.float64, torch.complex128


@pytest.fixture(scope="module")
def suite():
    return get_suite("tensorplay-opinfo")


@pytest.fixture(scope="module")
def torch_suite():
    return get_suite("torch-opinfo")


def _cases(suite, op, checks=("grad",), dtypes=("float64",), substring=None):
    return list(suite.cases(Selection(checks=checks, ops=(op,), dtypes=dtypes, substring=substring)))


# -- registry and ids -------------------------------------------------------------------------


def test_registered():
    assert "tensorplay-opinfo" in suite_names()
    slow = get_suite("tensorplay-opinfo", "slow")
    assert (slow.name, slow.engine, slow.mode) == ("tensorplay-opinfo", "tensorplay", "slow")


def test_same_cases_as_torch_opinfo_under_its_name(suite, torch_suite):
    ours = _cases(suite, "sin", checks=("grad", "gradgrad"), dtypes=("float64", "complex128"))
    theirs = _cases(torch_suite, "sin", checks=("grad", "gradgrad"), dtypes=("float64", "complex128"))
    assert [c.key for c in ours] == [c.key.replace("torch-opinfo::", "tensorplay-opinfo::", 1) for c in theirs]
    assert ours[0].key == "tensorplay-opinfo::sin::float64::sample0::grad"
    assert all(c.status == "run" and c.fingerprint for c in ours)


# -- statuses: PyTorch's, forward AD, missing ops, crashes --------------------------------------


@pytest.mark.parametrize(
    ("op", "check", "dtype", "status", "reason"),
    [
        ("add", "grad", F64, "run", ""),
        ("div.floor_rounding", "grad", F64, "skipped", "Skipped!"),  # PyTorch's own skip
        ("cov", "grad", F64, "xfail", "expected failure"),  # PyTorch's own xfail
        ("add", "fwgrad", F64, "skipped", NO_FORWARD_AD),
        ("add", "fwgrad_bwgrad", C128, "skipped", NO_FORWARD_AD),
        ("masked.sum", "grad", F64, "skipped", "tensorplay has no masked.sum"),
        ("__rmatmul__", "gradgrad", F64, "skipped", "tensorplay has no __rmatmul__"),
        ("max_pool2d_with_indices_backward", "grad", F64, "skipped", "tensorplay has no ops.aten"),
        ("cholesky_inverse", "grad", F64, "skipped", "tensorplay 1.0.0 crashes the process (SIGFPE)"),
        ("nn.functional.unfold", "gradgrad", F64, "skipped", "tensorplay 1.0.0 crashes the process (SIGFPE)"),
        ("softmax.with_dtype", "grad", F64, "skipped", "crashes the process (SIGFPE)"),  # by name
        ("fft.fft", "grad", C128, "skipped", "crashes the process (SIGSEGV or SIGABRT: heap corruption)"),
    ],
)
def test_status(op, check, dtype, status, reason):
    got_status, got_reason = tensorplay_status(op_named(op), check, dtype)
    assert got_status == status
    assert reason in got_reason


def test_skipped_tests_are_one_case_per_op_dtype_and_check(suite):
    cases = _cases(suite, "masked.sum", checks=("grad", "fwgrad"), dtypes=("float64", "complex128"))
    assert [(c.key, c.status) for c in cases] == [
        ("tensorplay-opinfo::masked.sum::float64::grad", "skipped"),
        ("tensorplay-opinfo::masked.sum::float64::fwgrad", "skipped"),
        ("tensorplay-opinfo::masked.sum::complex128::grad", "skipped"),
        ("tensorplay-opinfo::masked.sum::complex128::fwgrad", "skipped"),
    ]
    assert cases[1].reason == NO_FORWARD_AD and "SIGFPE" in _cases(suite, "cholesky_solve")[0].reason


def test_crashing_ops_are_never_built(suite):
    with pytest.raises(LookupError, match="SIGFPE"):
        suite.build(CaseId.parse("tensorplay-opinfo::cholesky_inverse::float64::sample0::grad"))


def test_samples_that_do_not_convert_are_skipped_with_the_reason(suite):
    cases = _cases(suite, "nn.functional.triplet_margin_with_distance_loss")
    skipped = [c for c in cases if c.status == "skipped"]
    assert skipped and all(c.id.sample is not None for c in skipped)
    assert "does not convert to tensorplay" in skipped[0].reason
    assert "PairwiseDistance has no tensorplay counterpart" in skipped[0].reason


# -- op lookup and translation ----------------------------------------------------------------


def test_lookup_by_name_in_tensorplay():
    assert lookup.op_callable(op_named("nn.functional.conv2d")) is tp.nn.functional.conv2d
    assert lookup.op_callable(op_named("linalg.det")) is tp.linalg.det
    assert lookup.op_callable(op_named("div.floor_rounding")) is tp.div  # the name, not full_name
    radd = lookup.op_callable(op_named("__radd__"))  # a method-only name
    assert to_numpy(radd(tp.tensor([1.0, 2.0]), 3.0)).tolist() == [4.0, 5.0]
    assert lookup.tensorplay_attribute("masked.sum") is None and lookup.tensorplay_attribute("pca_lowrank") is None


def test_python_ops_are_translated_with_their_argument_order():
    einsum = lookup.op_callable(op_named("einsum"))  # lambda tensors, equation: torch.einsum(equation, tensors)
    a, b = tp.tensor([[1.0, 2.0]]), tp.tensor([[3.0], [4.0]])
    assert to_numpy(einsum([a, b], "ij,jk->ik")).tolist() == [[11.0]]
    embedding = lookup.op_callable(op_named("nn.functional.embedding"))  # (weight, idx) -> embedding(idx, weight)
    weight = tp.tensor([[1.0, 1.0], [2.0, 2.0]])
    assert to_numpy(embedding(weight, tp.tensor([1, 0]))).tolist() == [[2.0, 2.0], [1.0, 1.0]]
    transposed = lookup.op_callable(op_named("T"))  # lambda x: x.T (a property)
    assert tuple(transposed(tp.zeros((2, 3))).shape) == (3, 2)


def test_translation_names_what_tensorplay_lacks():
    with pytest.raises(Untranslatable, match=r"tensorplay has no masked \(it calls torch\.masked\._output_mask\)"):
        translate(op_named("masked.amax").gradcheck_wrapper)
    assert "tensorplay has no nn.functional.nonexistent" in _untranslatable_reason(
        lambda x: torch.nn.functional.nonexistent(x)
    )


def _untranslatable_reason(function) -> str:
    function.__module__ = "torch.testing.fake"  # as if it were torch's test code
    try:
        translate(function)
    except Untranslatable as e:
        return str(e)
    return ""


def test_wrappers_have_tensorplay_versions():
    assert lookup.wrapper(op_named("linalg.eigh")) is helpers.gradcheck_wrapper_hermitian_input
    assert lookup.wrapper(op_named("nn.functional.alpha_dropout")) is helpers.wrapper_set_seed
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    hermitian = helpers.gradcheck_wrapper_hermitian_input(lambda a: a, x)
    assert to_numpy(hermitian).tolist() == [[2.0, 5.0], [5.0, 8.0]]
    ctc = lookup.wrapper(op_named("nn.functional.ctc_loss"))  # translated: log_softmax(dim=2)
    logits = tp.zeros((1, 1, 4))
    assert np.allclose(to_numpy(ctc(lambda a: a, logits)), np.log(0.25))


def test_seeded_random_ops_repeat_their_draws():
    dropout = lookup.op_callable(op_named("nn.functional.dropout"))  # wrapper_set_seed(dropout, ...)
    x = tp.ones((50,), dtype=tp.float64)
    tp.manual_seed(0)
    first = to_numpy(dropout(x, p=0.5))
    tp.rand(3)
    assert np.array_equal(to_numpy(dropout(x, p=0.5)), first) and 0 < np.count_nonzero(first) < 50


# -- conversion -------------------------------------------------------------------------------


def test_conversion_copies_values_dtypes_and_requires_grad():
    x = torch.randn(3, 4, dtype=F64, requires_grad=True)
    index = torch.tensor([2, 0], dtype=torch.int64)
    converted = Converter()((x, index, {"dtype": F64, "size": torch.Size([2, 2]), "s": slice(1, None)}))
    tx, tindex, kwargs = converted
    assert np.array_equal(to_numpy(tx), x.detach().numpy()) and tx.dtype == tp.float64
    assert tx.requires_grad and tx.is_leaf and not tindex.requires_grad and tindex.dtype == tp.int64
    assert kwargs == {"dtype": tp.float64, "size": (2, 2), "s": slice(1, None)}
    with torch.no_grad():
        x[0, 0] = 100.0  # real copies: neither side sees the other's writes
    tx.data[(1, 1)] = -100.0
    assert to_numpy(tx)[0, 0] != 100.0 and x[1, 1].item() != -100.0


def test_conversion_keeps_strides_of_noncontiguous_and_empty_tensors():
    base = torch.randn(4, 6, dtype=C128)
    noncontiguous = base[:, ::2].t().requires_grad_()
    empty = torch.zeros(5, 0, dtype=F64, requires_grad=True)
    tnc, tempty = Converter()((noncontiguous, empty))
    assert tnc.stride() == noncontiguous.stride() and not tnc.is_contiguous() and tnc.is_leaf
    assert np.array_equal(to_numpy(tnc), noncontiguous.detach().numpy())
    assert tempty.stride() == empty.stride() == (1, 1)  # tp.tensor(np.zeros((5, 0))) has (0, 0)


def test_a_tensor_used_twice_stays_one_tensor():
    x = torch.randn(3, dtype=F64, requires_grad=True)
    converted = convert(SampleInput(x, args=(x,)))
    assert converted.input is converted.args[0] and converted.inputs == (converted.input, converted.input)


def test_what_does_not_convert():
    with pytest.raises(Unconvertible, match="sparse_coo"):
        Converter()(torch.eye(2, dtype=F64).to_sparse())
    with pytest.raises(Unconvertible, match="PairwiseDistance"):
        Converter()({"distance_function": torch.nn.PairwiseDistance()})


def test_gradcheck_inputs_and_values_match_the_torch_sample(suite, torch_suite):
    case = "nn.functional.conv2d::float64::sample4::grad"
    ours = suite.build(CaseId.parse(f"tensorplay-opinfo::{case}"))
    theirs = torch_suite.build(CaseId.parse(f"torch-opinfo::{case}"))
    assert len(ours.inputs) == len(theirs.inputs) == 3
    for mine, reference in zip(ours.inputs, theirs.inputs):
        assert np.array_equal(to_numpy(mine), reference.detach().numpy()) and mine.requires_grad
    out, reference = ours.func(*ours.inputs), theirs.func(*theirs.inputs)
    assert np.allclose(to_numpy(out), reference.detach().numpy(), rtol=1e-12, atol=1e-12)


# -- fingerprints and seeding ----------------------------------------------------------------


def test_built_case_has_the_enumerated_fingerprint(suite):
    (info,) = _cases(suite, "linalg.det", checks=("gradgrad",), dtypes=("complex128",), substring="sample2:")
    built = suite.build(info.id)
    assert built.fingerprint == info.fingerprint == suite.build(info.id).fingerprint
    assert len(built.calls) == 2 and all(isinstance(x, tp.Tensor) and x.requires_grad for x in built.inputs)


def test_fingerprint_sees_values_strides_and_flags():
    x = torch.arange(6, dtype=F64).reshape(2, 3)

    def of(t, *args):
        return fingerprint(convert(SampleInput(t, args=args)).values)

    base = of(x.clone().requires_grad_(), 1)
    assert of(x.clone().requires_grad_(), 1) == base
    changed = x.clone()
    changed[1, 2] += 1e-12
    assert of(changed.requires_grad_(), 1) != base
    assert of(x.t().contiguous().t().requires_grad_(), 1) != base  # strides
    assert of(x.clone(), 1) != base  # requires_grad
    assert of(x.clone().requires_grad_(), 2) != base  # a constant


def test_fingerprints_agree_across_processes(suite):
    ids = [
        "tensorplay-opinfo::nn.functional.conv2d::float64::sample4::grad",
        "tensorplay-opinfo::addmm::complex128::sample1::grad",
    ]
    code = (
        "import sys; from distcheck.suites import get_suite, CaseId; s = get_suite('tensorplay-opinfo');"
        "print(' '.join(s.build(CaseId.parse(i)).fingerprint for i in sys.argv[1:]))"
    )
    out = subprocess.run([sys.executable, "-c", code, *ids], capture_output=True, text=True, check=True).stdout
    assert out.split() == [suite.build(CaseId.parse(i)).fingerprint for i in ids]


def test_before_call_reseeds_tensorplay(suite):
    built = suite.build(CaseId.parse("tensorplay-opinfo::add::float64::sample0::gradgrad"))
    built.before_call()
    first = to_numpy(tp.rand(4))
    built.before_call()
    assert np.array_equal(to_numpy(tp.rand(4)), first)


def test_function_travels_by_case_id(suite):
    from ray import cloudpickle  # what the Ray executor ships a split case's function with

    built = suite.build(CaseId.parse("tensorplay-opinfo::linalg.eigh::float64::sample0::grad"))
    copy = cloudpickle.loads(cloudpickle.dumps(built.func))
    outputs, again = built.func(*built.inputs), copy(*built.inputs)
    assert len(outputs) == len(again) == 2
    assert all(np.array_equal(to_numpy(a), to_numpy(b)) for a, b in zip(outputs, again))


# -- end to end: distcheck's verdicts, tensorplay vs torch --------------------------------------


def _verdict(suite, case: str) -> tuple[str, str]:
    return judge(suite.build(CaseId.parse(f"{suite.name}::{case}")), distcheck_checker(SerialExecutor()))


@pytest.mark.parametrize(
    "case",
    [
        "sin::float64::sample0::grad",
        "add::float64::sample0::grad",
        "add::float64::sample0::gradgrad",
        "matmul::float64::sample10::grad",
        "sum::float64::sample0::grad",
        "T::complex128::sample0::gradgrad",
    ],
)
def test_same_verdict_as_torch_where_tensorplay_is_right(suite, torch_suite, case):
    assert _verdict(suite, case) == _verdict(torch_suite, case) == ("pass", "")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        # DESIGN.md's known defect: matmul's backward cannot take an undefined grad-output
        ("matmul::float64::sample0::grad", "Expected backward function to handle undefined output grads"),
        # tensorplay's vmap has no batching rule for conv2d's backward
        ("nn.functional.conv2d::float64::sample0::grad", "no batching rule for conv2d_grad_input"),
        # nor for conj, in sin's double backward
        ("sin::float64::sample0::gradgrad", "no batching rule for conj"),
    ],
)
def test_tensorplay_defects_fail_where_torch_passes(suite, torch_suite, case, message):
    verdict, text = _verdict(suite, case)
    assert (verdict, _verdict(torch_suite, case)[0]) == ("fail", "pass")
    assert message in text
