"""Declared suites: validation, enumeration (groups, then their cases), seeding, fingerprints,
and the calls each check kind makes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from distcheck.case.judge import distcheck_checker
from distcheck.executors import SerialExecutor
from distcheck.suites import CaseId, Selection, UsageError, get_suite
from distcheck.suites.declare import DeclaredSuite, GroupInfo, Op, declare_suite
from distcheck.suites.torch_opinfo.calls import check_calls
from distcheck.suites.torch_opinfo.fingerprint import values_fingerprint
from tests.suites import declared_suites
from tests.suites.declared_suites import vectors

GRAD = Selection(checks=("grad",))


def _ids(suite, selection=None):
    return [f"{c.key} [{c.status}] {c.reason}".strip() for c in suite.cases(selection or Selection())]


def test_cases_of_a_declared_suite():
    ids = _ids(declared_suites.suite, Selection(ops=("sin", "skipped", "expected")))
    assert ids == [
        "declared::sin::float64::sample0::grad [run]",
        "declared::sin::float64::sample1::grad [run]",
        "declared::sin::float64::sample0::gradgrad [run]",
        "declared::sin::float64::sample1::gradgrad [run]",
        "declared::sin::complex128::sample0::grad [run]",
        "declared::sin::complex128::sample1::grad [run]",
        "declared::sin::complex128::sample0::gradgrad [run]",
        "declared::sin::complex128::sample1::gradgrad [run]",
        "declared::skipped::float64::grad [skipped] not today",
        "declared::skipped::float64::gradgrad [skipped] not today",
        "declared::expected::float64::grad [xfail] wrong on purpose",
    ]


def test_groups_come_from_the_declarations_only():
    calls = []

    def counted(dtype):
        calls.append(dtype)
        yield from vectors(dtype)

    suite = declare_suite(
        "s", [Op("a", torch.sin, counted, xfail={"gradgrad:float64": "r"}), Op("b", torch.cos, counted)]
    )
    groups = list(suite.groups(Selection()))
    assert not calls
    assert groups[0].id == CaseId("s", "a", "float64", "gradgrad") and groups[0].status == "xfail"
    assert groups[1] == GroupInfo("s", "a", "float64", ("grad",))
    assert groups[2] == GroupInfo("s", "b", "float64", ("grad", "gradgrad"))
    listed = suite.list_group(groups[2], Selection())
    assert calls == [torch.float64]
    assert [c.key for c in listed][:2] == ["s::b::float64::sample0::grad", "s::b::float64::sample1::grad"]
    assert all(c.fingerprint and c.status == "run" and c.cost == 0 for c in listed)


def test_selection_and_usage_errors():
    suite = declared_suites.suite
    assert _ids(suite, Selection(checks=("gradgrad",), dtypes=("complex128",))) == [
        "declared::sin::complex128::sample0::gradgrad [run]",
        "declared::sin::complex128::sample1::gradgrad [run]",
    ]
    assert _ids(suite, Selection(ops=("wrong",), substring="sample1")) == [
        "declared::wrong::float64::sample1::grad [run]"
    ]
    with pytest.raises(UsageError, match=r"unknown op 'wrongg' in suite 'declared' \(did you mean wrong\?\)"):
        list(suite.cases(Selection(ops=("wrongg",))))
    with pytest.raises(UsageError, match="unknown dtype 'float32' for suite 'declared'"):
        list(suite.cases(Selection(dtypes=("float32",))))


def test_samples_are_seeded_and_fingerprinted_alike_in_every_process():
    first = list(declared_suites.suite.cases(GRAD))
    fresh = dataclasses.replace(declared_suites.suite)  # no samples kept: generated again
    assert [c.fingerprint for c in fresh.cases(GRAD)] == [c.fingerprint for c in first]
    torch.manual_seed(99)  # whatever the global RNG was
    built = fresh.build(first[1].id)
    assert built.fingerprint == first[1].fingerprint == values_fingerprint(built.inputs)
    assert first[0].fingerprint != first[1].fingerprint


def test_a_sample_changed_in_place_is_generated_again():
    suite = dataclasses.replace(declared_suites.suite)
    case = CaseId("declared", "sin", "float64", "grad", 0)
    built = suite.build(case)
    with torch.no_grad():
        built.inputs[0].add_(1)
    assert suite.build(case).fingerprint == built.fingerprint
    assert values_fingerprint(suite.build(case).inputs) == built.fingerprint


def test_calls_are_torch_opinfos_with_the_ops_options():
    suite = declare_suite(
        "s", [Op("a", torch.sin, vectors, checks=("grad", "gradgrad", "fwgrad"), options={"atol": 1e-4})]
    )
    (grad,) = suite.build(CaseId("s", "a", "float64", "grad", 0)).calls
    assert grad.function == "gradcheck"
    (opinfo,) = check_calls(suite.ops[0], "grad", "fast")  # torch-opinfo's, for an OpInfo with these flags
    assert grad.kwargs == {**opinfo.kwargs, "atol": 1e-4}
    assert grad.kwargs["check_batched_grad"] and grad.kwargs["fast_mode"] and grad.kwargs["check_undefined_grad"]
    contiguous, noncontiguous = suite.with_mode("slow").build(CaseId("s", "a", "float64", "gradgrad", 1)).calls
    assert contiguous.function == "gradgradcheck" and contiguous.kwargs["fast_mode"] is False
    assert (contiguous.kwargs["gen_non_contig_grad_outputs"], noncontiguous.kwargs["gen_non_contig_grad_outputs"]) == (
        False,
        True,
    )
    (fwgrad,) = suite.build(CaseId("s", "a", "float64", "fwgrad", 0)).calls
    assert fwgrad.kwargs["check_forward_ad"] and not fwgrad.kwargs["check_backward_ad"]


def test_checks_are_seeded_per_case():
    built = declared_suites.suite.build(CaseId("declared", "sin", "float64", "gradgrad", 0))
    built.before_call()
    first = torch.rand(3)
    built.before_call()
    assert torch.equal(torch.rand(3), first)


def test_the_examples_known_failure_fails():
    """The example package's xfail is real: its straight-through estimator fails gradcheck."""
    example = get_suite("example-functions")
    (ste,) = [c for c in example.cases(GRAD) if c.id.op == "round_ste"]
    assert ste.status == "xfail" and "straight-through" in ste.reason
    suite = dataclasses.replace(example.suite, ops=tuple(dataclasses.replace(op, xfail={}) for op in example.ops))
    (case,) = [c for c in suite.cases(GRAD) if c.id.op == "round_ste"]
    from distcheck.case.judge import judge

    verdict, message = judge(suite.build(case.id), distcheck_checker(SerialExecutor()))
    assert verdict == "fail" and "Jacobian mismatch" in message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "a::b"}, "without '::'"),
        ({"checks": ("grad", "hessian")}, "unknown check kind 'hessian'"),
        ({"dtypes": ("float65",)}, "unknown torch dtype 'float65'"),
        ({"options": {"atool": 1}}, "options atool are not gradcheck / gradgradcheck keywords"),
        ({"xfail": {"float32": "r"}}, "skip / xfail key 'float32'"),
        ({"function": None}, "must be callables"),
    ],
)
def test_bad_declarations(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Op(**{"name": "a", "function": torch.sin, "samples": vectors, **kwargs})


def test_bad_suites():
    with pytest.raises(ValueError, match="ops declared twice: a"):
        declare_suite("s", [Op("a", torch.sin, vectors), Op("a", torch.cos, vectors)])
    with pytest.raises(ValueError, match="unknown mode"):
        declare_suite("s", [], mode="medium")
    assert isinstance(declare_suite("s", []), DeclaredSuite)


def test_marks_most_specific_first_skip_over_xfail():
    op = Op("a", torch.sin, vectors, skip={"gradgrad:float64": "s1"}, xfail={"*": "x", "gradgrad": "x2"})
    assert op.status("gradgrad", "float64") == ("skipped", "s1")
    assert op.status("grad", "float64") == ("xfail", "x")
    op = Op("a", torch.sin, vectors, dtypes=("float64", "complex128"), xfail={"*": "x", "gradgrad": "x2"})
    assert op.status("gradgrad", "complex128") == ("xfail", "x2")


def test_a_broken_sample_generator_is_an_error_per_check():
    cases = list(declared_suites.broken_samples.cases(Selection()))
    assert [(c.key, c.status) for c in cases] == [
        ("broken-samples::broken::float64::grad", "error"),
        ("broken-samples::broken::float64::gradgrad", "error"),
    ]
    assert cases[0].reason == "generating the samples failed: RuntimeError: no samples today"
