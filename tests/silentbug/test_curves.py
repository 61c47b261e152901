"""`verigap silentbug curves --out`: the learning-curve table in the docs comes from a results
file written from cached runs (here a hand-made cached run; no training)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verigap.cli import app
from verigap.results import read_meta, read_result
from verigap.runs import METRICS, RESULT
from verigap.silentbug.runner import plan_run
from verigap.silentbug.substrate import pristine_files
from verigap.silentbug.views import curves_table


def test_curves_out_writes_a_results_file_the_view_draws(tmp_path: Path) -> None:
    job = plan_run(tmp_path, "cartpole_single", "clean", pristine_files(), {}, 1)
    job.run_dir.mkdir(parents=True)
    episodes = [
        {"kind": "episode", "global_step": s, "return": r}
        for s, r in (
            (4_000, 20.0),
            (12_000, 60.0),
            (20_000, 100.0),
            (28_000, 150.0),
            (36_000, 190.0),
            (39_000, 210.0),
        )
    ]
    (job.run_dir / METRICS).write_text("".join(json.dumps(e) + "\n" for e in episodes))
    (job.run_dir / RESULT).write_text(json.dumps({"status": "ok", "score": 200.0}))
    out = tmp_path / "curves.json"
    res = CliRunner().invoke(
        app,
        [
            "silentbug",
            "curves",
            "--substrate",
            "cartpole_single",
            "--seeds",
            "1",
            "--cache-dir",
            str(tmp_path),
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    data = read_result(out)
    assert data["rows"] == [
        {
            "substrate": "cartpole_single",
            "label": "clean",
            "seed": 1,
            "curve": [20.0, 60.0, 100.0, 150.0, 200.0],
        }
    ]
    assert "verigap silentbug curves --substrate cartpole_single" in read_meta(out)["command"]
    table = curves_table(data).splitlines()
    assert table[0] == "| substrate | seed | 0-20% | 20-40% | 40-60% | 60-80% | 80-100% |"
    assert table[2] == "| cartpole_single | 1 | 20.0 | 60.0 | 100.0 | 150.0 | 200.0 |"


def test_curves_with_nothing_cached_says_how_to_get_runs(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["silentbug", "curves", "--substrate", "cartpole_single", "--cache-dir", str(tmp_path)]
    )
    assert res.exit_code == 2 and "--train" in res.output
