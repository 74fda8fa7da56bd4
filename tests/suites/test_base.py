"""Case ids, selections, expected errors, the suite registry."""

from __future__ import annotations

import pytest

from distcheck.suites import CaseId, ExpectedError, Selection, UsageError, get_suite, suite_names


@pytest.mark.parametrize(
    "text",
    [
        "torch-opinfo::nn.functional.conv2d::float64::sample3::gradgrad",
        "torch-opinfo::nn.functional.interpolate.nearest-exact::complex128::sample0::fwgrad_bwgrad",
        "torch-opinfo::cov::float64::grad",
    ],
)
def test_case_ids_round_trip(text):
    assert str(CaseId.parse(text)) == text


def test_case_ids_and_infos_pickle_whole_and_frozen():
    import pickle

    from distcheck.suites.base import CaseInfo

    info = CaseInfo(CaseId("torch-opinfo", "mul", "float64", "gradgrad", 7), "run", "", "ab12", 5)
    again = pickle.loads(pickle.dumps([info, info.id], protocol=5))
    assert again == [info, info.id] and hash(again[1]) == hash(info.id)
    assert again[0].id.text == "torch-opinfo::mul::float64::sample7::gradgrad" and again[0].key == info.key
    assert pickle.loads(pickle.dumps(CaseId.parse("torch-opinfo::cov::float64::grad"))).sample is None
    with pytest.raises(AttributeError):
        again[0].id.op = "add"  # frozen, as made by the constructor


def test_case_id_parts():
    case = CaseId.parse("torch-opinfo::nn.functional.conv2d::float64::sample3::gradgrad")
    assert case == CaseId("torch-opinfo", "nn.functional.conv2d", "float64", "gradgrad", 3)
    assert CaseId.parse("torch-opinfo::cov::float64::grad").sample is None


@pytest.mark.parametrize(
    "text",
    [
        "torch-opinfo::add::float64::3::grad",  # no "sample" prefix
        "torch-opinfo::add::float64::sample0::hessian",  # unknown check kind
        "torch-opinfo::add::grad",  # too few parts
        "torch-opinfo::::float64::sample0::grad",  # empty op
    ],
)
def test_bad_case_ids(text):
    with pytest.raises(ValueError, match="bad case id"):
        CaseId.parse(text)


def test_selection_substring_matches_the_whole_id():
    case = CaseId("s", "add", "float64", "grad", 13)
    assert Selection(substring="::sample13::").wants(case)
    assert not Selection(substring="::sample1::").wants(case)
    assert Selection().wants(case)


def test_expected_error_is_type_and_pattern():
    expected = ExpectedError(NotImplementedError, r"forward AD with .* that does not")
    assert expected.matches(NotImplementedError("Trying to use forward AD with foo that does not support it"))
    assert not expected.matches(RuntimeError("Trying to use forward AD with foo that does not support it"))
    assert not expected.matches(NotImplementedError("something else"))


def test_registry():
    assert "torch-opinfo" in suite_names()
    assert get_suite("torch-opinfo", "slow").mode == "slow"
    with pytest.raises(UsageError, match="unknown suite 'nope'"):
        get_suite("nope")
    with pytest.raises(UsageError, match="unknown mode"):
        get_suite("torch-opinfo", "medium")
