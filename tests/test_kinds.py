"""The vocabularies as types read and serialize as the strings they replace."""

from __future__ import annotations

import json
import pickle

from distcheck.kinds import FUNCTION, PARTS_IN_TORCH_ORDER, AuxCheck, Mode, Part, VariantKey


def test_str_valued_kinds_serialize_as_their_strings():
    values = [Mode.FORWARD, Part.IMAG, AuxCheck.BATCHED_GRAD, FUNCTION.densified()]
    assert json.loads(json.dumps(values)) == ["forward", "imag", "batched_grad", "f#dense"]
    assert {"forward": 1}[Mode.FORWARD] == 1 and f"{Part.REAL}" == "real"
    assert [pickle.loads(pickle.dumps(v)) for v in values] == values


def test_variant_keys():
    assert VariantKey.of() is FUNCTION and FUNCTION == "f"
    assert VariantKey.of(Part.IMAG) == "imag" and VariantKey.of(Part.REAL, inputs=True) == "inputs-real"
    assert isinstance(VariantKey.of(Part.IMAG).densified(), VariantKey)
    assert PARTS_IN_TORCH_ORDER == ("imag", "real") and Part.REAL.other is Part.IMAG
