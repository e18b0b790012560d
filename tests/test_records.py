"""course.records: saving and loading recorded measurements, and measuring on a GPU or loading elsewhere."""

import json

import pytest

from course import records, runtime


def test_records_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    path = records.save("demo", [{"n": 1, "gbps": 2.5}], meta={"note": "test"})
    data = json.loads(path.read_text())
    assert data["rows"] == [{"n": 1, "gbps": 2.5}] and data["meta"]["note"] == "test"
    rec = records.load("demo")
    assert rec.rows[0]["gbps"] == 2.5
    assert "torch" in rec.label and rec.meta["triton"] in rec.label


def test_records_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="no recorded measurements named 'nothing'"):
        records.load("nothing")
    with pytest.raises(ValueError, match="plain file stem"):
        records.save("../escape", [])
    with pytest.raises(TypeError, match="list of dicts"):
        records.save("bad", {"n": 1})


def test_measured_or_recorded_measures_on_a_gpu_and_loads_otherwise(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    records.save("sweep", [{"n": 1}], meta={"gpu": "recorded GPU"})
    rec = records.measured_or_recorded("sweep", measure=lambda: [{"n": 2}])
    assert rec.rows == ([{"n": 1}] if runtime.INTERPRET else [{"n": 2}])
