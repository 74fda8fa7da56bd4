"""Suggestions for unknown names: dotted parts first, then spelling."""

from __future__ import annotations

from distcheck.suites.suggest import hint, similar

KNOWN = ["add", "addcdiv", "div.no_rounding_mode", "div.trunc_rounding", "nn.functional.conv2d", "cov", "conj"]
KNOWN += ["nn.functional.relu", "real", "ravel", "lu", "nn.functional.conv_transpose2d"]


def test_a_dotted_part_is_found_before_a_spelling():
    assert similar("div", KNOWN)[:2] == ["div.no_rounding_mode", "div.trunc_rounding"]
    assert similar("conv2d", KNOWN)[0] == "nn.functional.conv2d"
    assert similar("relu", KNOWN)[0] == "nn.functional.relu"
    assert similar("functional.relu", KNOWN)[0] == "nn.functional.relu"
    assert similar("conv", KNOWN)[:2] == ["nn.functional.conv2d", "nn.functional.conv_transpose2d"]  # a part's start
    assert similar("addd", KNOWN)[0] == "add"  # spelling


def test_hint():
    assert hint("relu", KNOWN).startswith(" (did you mean nn.functional.relu, ")
    assert hint("zzzzzz", KNOWN) == "" and similar("", KNOWN) == []
    assert similar("a", KNOWN) == ["add", "addcdiv"]
    assert similar("op", [f"x.op{k}" for k in range(10)]) == [f"x.op{k}" for k in range(5)]  # five at most
