"""`distcheck report` and `distcheck compare` read runs from an object store (the local S3
server) and write their reports there; no credential is ever written."""

from __future__ import annotations

import fsspec
import pytest

from distcheck.cli import main
from distcheck.storage.segments import SegmentWriter
from tests.reports.runs import records, run_folder
from tests.storage.s3 import ACCESS_KEY, SECRET_KEY


def upload(local: str, url: str) -> str:
    fs, path = fsspec.core.url_to_fs(url)
    fs.put(local, path, recursive=True)
    return url


def as_parts(local: str, url: str) -> str:
    """The run folder ``local`` at ``url`` as an interrupted run on a store leaves it: its
    records in two parts, no report, its blocks."""
    lines = open(f"{local}/records.jsonl").read().splitlines()
    upload(f"{local}/blocks", f"{url}/blocks")
    for half in (lines[: len(lines) // 2], lines[len(lines) // 2 : -1]):  # no RunFinish: interrupted
        writer = SegmentWriter(url, seconds=3600)
        writer.write("\n".join(half), len(half))
        writer.close()
    return url


def no_credentials_in(texts) -> None:
    for text in texts:
        assert ACCESS_KEY.encode() not in text and SECRET_KEY.encode() not in text


@pytest.mark.parametrize("written", ["finished", "interrupted"])
def test_report_reads_a_run_folder_in_the_store_and_writes_its_reports_there(s3, tmp_path, capsys, written):
    local = run_folder(tmp_path / "run", report=written == "finished")
    url = f"{s3.url}/runs/tonight"
    upload(local, url) if written == "finished" else as_parts(local, url)
    assert main(["report", url, "--junit", f"{s3.url}/out/junit.xml", "--html", f"{s3.url}/out/report.html"]) == 0
    objects = s3.objects()
    assert objects["out/junit.xml"].count(b"<testcase") == len(records())
    assert b"data:image/png;base64" in objects["out/report.html"]  # the failures' heatmaps, from the store's blocks
    no_credentials_in([*objects.values(), capsys.readouterr().out.encode()])


def test_compare_reads_both_runs_from_the_store(s3, tmp_path, capsys):
    old = upload(run_folder(tmp_path / "old"), f"{s3.url}/nightly-1/run")
    changed = [r if r.verdict != "pass" else type(r)(r.case, "fail", "broke", r.seconds, 1) for r in records()]
    new = upload(run_folder(tmp_path / "new", changed), f"{s3.url}/nightly-2/run")
    assert main(["compare", old, new]) == 1  # new failures
    out = capsys.readouterr().out
    assert all(r.id in out for r in records() if r.verdict == "pass")


def test_a_missing_bucket_or_run_is_a_usage_error_of_one_line(s3, capsys):
    assert main(["report", "s3://no-such-bucket-here/run", "--html", f"{s3.url}/r.html"]) == 2
    assert main(["report", f"{s3.url}/no-such-run", "--html", f"{s3.url}/r.html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # A Ray left running in this process by an earlier test forwards its workers' warnings to
    # this stderr too (each line prefixed "(<task> pid=N)"): only distcheck's own lines count.
    own = [line for line in err if "pid=" not in line.split(")")[0]]
    assert len(own) == 2 and all(
        line.startswith("distcheck: error: no such report or run folder: s3://") for line in own
    )
    assert not any("Traceback" in line for line in err)
