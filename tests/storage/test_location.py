"""Local paths, file:// URLs and object stores read and written alike; a store's failure is one line."""

from __future__ import annotations

import os

import pytest

from distcheck.storage import location
from distcheck.storage.location import StoreError


@pytest.fixture(params=["path", "file-url", "memory"])
def folder(request, tmp_path):
    """A folder to write in: a local path, the same as a file:// URL, or fsspec's in-memory store."""
    if request.param == "memory":
        import fsspec

        url = f"memory://distcheck-test/{os.getpid()}-{request.node.name}"
        yield url
        memory = fsspec.filesystem("memory")
        if memory.exists(url):
            memory.rm(url, recursive=True)
    else:
        yield str(tmp_path) if request.param == "path" else f"file://{tmp_path}"


def test_files_are_written_whole_read_back_and_listed(folder):
    target = location.join(folder, "report.json")
    location.write_text(target, '{"cases": []}')
    location.write_text(target, '{"cases": [1]}')  # replaced whole
    assert location.read_text(target) == '{"cases": [1]}'
    assert location.exists(target) and not location.exists(location.join(folder, "nope.json"))
    assert location.names(folder) == ["report.json"]  # no temporary file left beside it
    assert location.is_folder(folder) and not location.is_folder(target)
    assert location.names(location.join(folder, "nope")) == []
    location.remove(target)
    assert not location.exists(target)


def test_only_urls_of_other_stores_are_urls():
    assert location.is_url("s3://bucket/runs") and location.is_url("gs://b/x") and location.is_url("memory://x")
    assert not location.is_url("runs/x") and not location.is_url("file:///tmp/x") and not location.is_url("/a://b")
    assert location.local_path("file:///tmp/x") == "/tmp/x"
    assert location.join("s3://bucket/runs/", "x", "records") == "s3://bucket/runs/x/records"


def test_a_url_with_credentials_is_refused_before_the_store_is_asked():
    with pytest.raises(StoreError, match="credentials would be written"):
        location.read_text("s3://AKIDEXAMPLE:secret@bucket/report.json")


def test_a_store_without_its_package_or_protocol_is_one_line():
    with pytest.raises(StoreError, match="nosuchstore"):
        location.read_text("nosuchstore://bucket/report.json")


def test_a_missing_local_file_or_folder_is_one_line(tmp_path):
    with pytest.raises(StoreError, match=r"cannot read .*nope\.json: No such file"):
        location.read_text(str(tmp_path / "nope.json"))
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StoreError, match="cannot write .*a-file/x.json"):
        location.write_text(str(tmp_path / "a-file" / "x.json"), "{}")


def test_s3_objects_are_written_read_listed_and_removed(s3):
    folder = f"{s3.url}/runs/tonight"
    location.write_text(f"{folder}/report.json", "{}")
    assert location.read_text(f"{folder}/report.json") == "{}"
    assert location.is_folder(folder) and location.names(folder) == ["report.json"]
    location.check_folder_writable(f"{s3.url}/other", "run folder")
    assert set(s3.objects()) == {"runs/tonight/report.json"}  # the probe is gone


def test_a_missing_bucket_is_one_line(s3):
    with pytest.raises(StoreError, match="cannot read s3://no-such-bucket-here/x.json: .*bucket does not exist"):
        location.read_text("s3://no-such-bucket-here/x.json")
    with pytest.raises(StoreError, match="cannot write the run folder to s3://no-such-bucket-here/run: .*bucket"):
        location.check_folder_writable("s3://no-such-bucket-here/run", "run folder")
