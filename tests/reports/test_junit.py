"""JUnit XML: pytest's xunit2 layout, valid against the schema Jenkins uses, large runs."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

from distcheck.records.case_record import CaseRecord
from distcheck.reports import junit
from distcheck.reports.load import LoadedRun
from tests.reports.runs import case, records

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit.xsd")))


def _xml(records_, info=None) -> str:
    out = io.StringIO()
    run = LoadedRun(
        "r.json", info or {"suite": "torch-opinfo", "mode": "slow", "command": ["distcheck", "run"]}, records_
    )
    junit.write(out, run.records, junit.properties(run), lambda r: f"repro {r.id}")
    return out.getvalue()


def test_valid_against_the_schema_and_laid_out_as_pytest_does():
    text = _xml(records())
    SCHEMA.validate(text)
    root = ET.fromstring(text)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["grad", "gradgrad", "fwgrad"]
    grad = suites["grad"]
    assert (grad.get("tests"), grad.get("failures"), grad.get("errors"), grad.get("skipped")) == ("4", "2", "0", "1")
    assert suites["gradgrad"].get("errors") == "2" and grad.get("time") == "0.510"
    properties = {p.get("name"): p.get("value") for p in grad.find("properties")}
    assert properties["suite"] == "torch-opinfo" and properties["mode"] == "slow"
    assert properties["command"] == "distcheck run" and {"distcheck", "torch", "ray"} <= set(properties)
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    failure = cases[("torch-opinfo.sin", "grad[float64-sample3]")].find("failure")
    assert failure.get("type") == "GradcheckError"
    assert failure.get("message") == "Jacobian mismatch for output 0 with respect to input 0,"
    assert failure.text.endswith("reproduce: repro torch-opinfo::sin::float64::sample3::grad")
    error = cases[("torch-opinfo.sin", "gradgrad[float64-sample3]")].find("error")
    assert error.get("type") == "RuntimeError" and "boom" in error.text
    assert cases[("torch-opinfo.cos", "gradgrad[float64-sample0]")].find("error").get("type") == "Timeout"
    xfail = cases[("torch-opinfo.cov", "grad[float64]")].find("skipped")
    assert (xfail.get("type"), xfail.get("message")) == ("pytest.xfail", "OpInfo marks it <expected>")
    assert cases[("torch-opinfo.grid_sampler_3d", "fwgrad[float64]")].find("skipped").get("type") == "pytest.skip"
    assert list(cases[("torch-opinfo.add", "grad[float64-sample0]")]) == []


def test_characters_xml_cannot_hold_are_replaced():
    text = _xml([CaseRecord(case("x"), "fail", "bad \x00 byte \x1b[0m and ]]> & <", 0.1, 1)])
    SCHEMA.validate(text)
    assert "bad ? byte ?[0m and ]]> & <" in ET.fromstring(text).find(".//failure").text


def test_the_schema_rejects_what_jenkins_rejects():
    text = _xml(records())
    assert not SCHEMA.is_valid(text.replace(' errors="0"', "", 1))  # a required count
    assert not SCHEMA.is_valid(text.replace('time="0.510"', 'time="0.5 s"'))
    assert not SCHEMA.is_valid(text.replace("<failure ", "<fail ", 1).replace("</failure>", "</fail>", 1))


def test_a_45000_case_run_writes_and_parses():
    many = [
        CaseRecord(case(f"op{k // 100}", ("grad", "gradgrad")[k % 2], k % 100), ("pass", "fail")[k % 3 == 0], "m\n" * 3)
        for k in range(45_000)
    ]
    text = _xml(many)
    root = ET.fromstring(text)
    assert sum(int(s.get("tests")) for s in root.iter("testsuite")) == 45_000
    assert len(text) < 400 * 45_000  # a few lines per case
