import json
import math

import pytest

from verigap.errors import ConfigError
from verigap.results import read_meta, read_result, write_result


def test_round_trip_keeps_data_and_provenance(tmp_path):
    path = write_result(tmp_path / "r" / "x.json", {"b": [1, 2.5], "a": None}, command="make x")
    assert read_result(path) == {"a": None, "b": [1, 2.5]}
    meta = read_meta(path)
    assert meta["command"] == "make x"
    assert "numpy" in meta["versions"] and meta["machine"]["cpus"] >= 1
    assert list(json.loads(path.read_text())["data"]) == ["a", "b"]  # sorted keys


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_with_their_place(tmp_path, bad):
    with pytest.raises(ConfigError, match=r"rows\[1\]\.margin"):
        write_result(tmp_path / "x.json", {"rows": [{}, {"margin": bad}]}, command="c")
    assert not (tmp_path / "x.json").exists()


def test_reading_refuses_nan_literals_and_foreign_files(tmp_path):
    nan = tmp_path / "nan.json"
    nan.write_text('{"meta": {}, "data": {"x": NaN}}')
    with pytest.raises(ConfigError, match="not strict JSON"):
        read_result(nan)
    other = tmp_path / "other.json"
    other.write_text('{"x": 1}')
    with pytest.raises(ConfigError, match="not a results file"):
        read_result(other)
    with pytest.raises(ConfigError, match="no such results file"):
        read_result(tmp_path / "missing.json")


def test_a_command_is_required(tmp_path):
    with pytest.raises(ConfigError, match="command"):
        write_result(tmp_path / "x.json", {}, command=" ")


def test_committed_results_are_named_by_what_they_are():
    """A results file's name says what it holds, not which ticket asked for it; measurements
    that were not adopted live under results/investigations/."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "results"
    bad = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if re.search(r"issue\d|wave\d|(^|[_/])p\d\d([_.]|$)", p.relative_to(root).as_posix())
    ]
    assert bad == [], f"rename these by what they hold: {bad}"


def test_a_reproduction_leaves_the_file_untouched_and_a_change_rewrites_it(tmp_path):
    """Rerunning a job that reproduces its numbers (only times differ) must not dirty the
    checkout; any other difference is a new result and is written."""
    path = tmp_path / "r.json"
    write_result(path, {"x": 0.5, "runs": [{"seed": 0, "wall_s": 1.0}]}, command="make a")
    before = path.read_bytes()
    write_result(path, {"x": 0.5, "runs": [{"seed": 0, "wall_s": 9.0}]}, command="make a")
    assert path.read_bytes() == before
    write_result(path, {"x": 0.25, "runs": [{"seed": 0, "wall_s": 9.0}]}, command="make b")
    assert read_result(path)["x"] == 0.25 and read_meta(path)["command"] == "make b"
    write_result(path, {"x": 0.25, "runs": [{"seed": 1, "wall_s": 9.0}]}, command="make b")
    assert read_result(path)["runs"][0]["seed"] == 1
