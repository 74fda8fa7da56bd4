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


@pytest.mark.parametrize("device", [None, "cuda"])
def test_a_group_may_hold_a_wanted_case_exactly_when_some_sample_number_gives_one(device):
    """``may_want`` (known before a group's samples are listed) against the ids themselves:
    every substring of up to 4 characters of a small alphabet, against the samples whose
    numbers are written with the alphabet's digits (0 and 7), up to 6 of them."""
    import itertools
    import re

    from distcheck.suites.base import GroupInfo

    group = GroupInfo("s", "ad", "f6", ("grad", "fwgrad"))
    numbers = [0] + [int("".join(d)) for n in range(1, 7) for d in itertools.product("70", repeat=n) if d[0] == "7"]
    ids = [CaseId("s", "ad", "f6", check, n, device).text for check in group.checks for n in (*numbers, None)]
    for size in range(1, 5):
        for letters in itertools.product("s:ad7g0e", repeat=size):
            text = "".join(letters)
            if re.search(r"(^|\D)0\d", text):
                continue  # a number with a leading zero: no sample has one, may_want says "maybe"
            wanted = any(text in case for case in ids)
            assert Selection(substring=text).may_want(group, device) == wanted, text
    assert Selection().may_want(group) and not Selection(substring="add").may_want(group)


def test_empty_lists_select_nothing_and_are_refused():
    for field in ("checks", "dtypes", "ops"):
        with pytest.raises(UsageError, match=rf"Selection\({field}=\(\)\) selects no case"):
            Selection(**{field: ()})


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
