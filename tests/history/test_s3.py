"""The history store on an object store (the local S3 server of tests/storage), and runs whose
folders live there: the same history as on a local disk, idempotent adds, the index as a cache,
unfinished runs refused, no credential written."""

from __future__ import annotations

import json

import fsspec
import pytest

from distcheck.cli import main
from distcheck.history.store import INDEX, HistoryStore
from distcheck.storage.segments import SegmentWriter
from tests.history.runs import night, run_folder
from tests.storage.s3 import ACCESS_KEY, SECRET_KEY

PATTERNS = {"sin": "PPFF", "cos": "PFPF", "tan": "PPPP"}


def _nights(tmp_path, count: int = 4) -> list[str]:
    return [
        run_folder(tmp_path / f"run{n}", n, {op: "pass" if p[n] == "P" else "fail" for op, p in PATTERNS.items()})
        for n in range(count)
    ]


def _upload(local: str, url: str) -> str:
    fs, path = fsspec.core.url_to_fs(url)
    fs.put(local, path, recursive=True)
    return url


def _json(capsys, *args: str) -> dict:
    assert main(["history", *args, "--format", "json", "--all"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_store_in_s3_holds_the_history_a_local_one_does(s3, tmp_path, capsys):
    folders = _nights(tmp_path)
    store = f"{s3.url}/nightly/history"
    local = _json(capsys, str(tmp_path / "history"), *folders)
    remote = _json(capsys, store, *folders[2:], *folders[:2])  # out of order
    assert {**remote, "store": None} == {**local, "store": None}
    assert remote["nights"] == [night(n) for n in range(4)]
    keys = sorted(s3.objects())
    assert keys[0] == "nightly/history/distcheck-history.json" and f"nightly/history/{INDEX}" in keys
    assert len([k for k in keys if k.endswith(".run")]) == 4 and len([k for k in keys if "/ids/" in k]) == 1
    before = s3.objects()
    assert main(["history", store, *folders]) == 0  # again: nothing written
    assert s3.objects() == before


def test_the_index_in_s3_is_a_cache(s3, tmp_path, capsys):
    folders = _nights(tmp_path)
    store = f"{s3.url}/history"
    HistoryStore(store, create=True)
    main(["history", store, *folders[:2]])
    s3.server.client().delete_object(Bucket=s3.name, Key=f"history/{INDEX}")
    main(["history", store, *folders[2:]])
    capsys.readouterr()
    assert [h.night for h in HistoryStore(store).headers()] == [night(n) for n in range(4)]
    assert len(json.loads(s3.objects()[f"history/{INDEX}"])["runs"]) == 4


def test_run_folders_in_s3_are_added_as_they_are(s3, tmp_path, capsys):
    folders = [_upload(local, f"{s3.url}/runs/night{n}") for n, local in enumerate(_nights(tmp_path))]
    data = _json(capsys, f"{s3.url}/history", *folders)
    sin = data["cases"]["torch-opinfo::sin::float64::sample0::grad"]
    assert sin["verdicts"] == ["pass", "pass", "fail", "fail"] and sin["first_failing"] == night(2)
    assert [run["source"] for runs in data["runs"].values() for run in runs] == folders


def test_a_run_in_s3_written_in_parts_is_read_and_an_unfinished_one_refused(s3, tmp_path, capsys):
    local = run_folder(tmp_path / "run", 0, {"sin": "pass", "cos": "fail"}, report=False)
    lines = open(f"{local}/records.jsonl").read().splitlines()
    for url, kept in ((f"{s3.url}/runs/done", lines), (f"{s3.url}/runs/killed", lines[:-1])):  # no RunFinish
        writer = SegmentWriter(url, seconds=3600)
        for half in (kept[:2], kept[2:]):
            writer.write("\n".join(half), len(half))
        writer.close()
    data = _json(capsys, f"{s3.url}/history", f"{s3.url}/runs/done")
    assert data["cases"]["torch-opinfo::cos::float64::sample0::grad"]["verdicts"] == ["fail"]
    assert main(["history", f"{s3.url}/history", f"{s3.url}/runs/killed"]) == 2
    assert f"{s3.url}/runs/killed is a run that is not finished" in capsys.readouterr().err


def test_report_and_compare_read_the_history_in_s3(s3, tmp_path, capsys):
    folders = _nights(tmp_path)
    store = f"{s3.url}/history"
    assert main(["report", folders[0], "--history", store]) == 0
    assert main(["history", store, *folders[1:3]]) == 0
    capsys.readouterr()
    assert main(["compare", folders[2], folders[3], "--history", store]) == 1  # a new failure
    assert f"failing since {night(2)}" in capsys.readouterr().out


def test_a_store_that_fails_is_one_line(s3, tmp_path, capsys):
    folders = _nights(tmp_path, 1)
    assert main(["history", "s3://no-such-bucket-here/history", *folders]) == 2
    err = capsys.readouterr().err
    assert err.count("distcheck: error:") == 1 and "Traceback" not in err and "no-such-bucket-here" in err


def test_no_credential_is_written_into_the_store(s3, tmp_path, capsys):
    folders = [_upload(local, f"{s3.url}/runs/night{n}") for n, local in enumerate(_nights(tmp_path, 2))]
    main(["history", f"{s3.url}/history", *folders])
    stored = {k: v for k, v in s3.objects().items() if k.startswith("history/")}
    assert stored and not any(ACCESS_KEY.encode() in v or SECRET_KEY.encode() in v for v in stored.values())


@pytest.mark.parametrize("url", ["s3://key:secret@bucket/history"])
def test_a_url_with_credentials_is_refused(url, tmp_path, capsys):
    assert main(["history", url, *_nights(tmp_path, 1)]) == 2
    assert "a URL with credentials would be written" in capsys.readouterr().err


def test_an_older_report_without_its_start_reads_it_from_its_folders_records(s3, tmp_path, capsys):
    local = run_folder(tmp_path / "run", 2, {"sin": "pass"})
    with open(f"{local}/report.json") as f:
        report = json.load(f)
    for key in ("started", "versions"):
        del report["summary"][key]  # as distcheck wrote it before reports named their start
    with open(f"{local}/report.json", "w") as f:
        json.dump(report, f)
    folder = _upload(local, f"{s3.url}/runs/old")
    assert _json(capsys, f"{s3.url}/history", folder)["nights"] == [night(2)]


def test_the_trends_page_written_to_s3(s3, tmp_path, capsys):
    assert main(["history", f"{s3.url}/history", *_nights(tmp_path), "--html", f"{s3.url}/trends.html"]) == 0
    assert b"<section id='trends'" in s3.objects()["trends.html"]
