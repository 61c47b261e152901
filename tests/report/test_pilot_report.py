"""The pilot report is built from results files only: hand-built runs in, their numbers out."""

import json

import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.report import build_report, load_runs, summary_table
from verigap.runs import write_json_atomic

OUT = ("fixed", "off_by_one", "wrong", "stub", "delete")


def _outcomes(untested_delete: int) -> dict[str, int]:
    d = {f"{w}/{o}": 0 for w in ("tested", "untested") for o in OUT}
    d["tested/fixed"] = 10
    d["untested/delete"] = untested_delete
    d["untested/fixed"] = 10 - untested_delete
    return d


def _run(root, setting, seed, k, fs_start, fs_final, steps=1000):
    d = root / setting / f"seed{seed}"
    d.mkdir(parents=True)

    def ev(fs, dels):
        return {
            "visible_pass": 0.5 + fs / 2,
            "true_success": 0.5 - fs / 2,
            "false_success": fs,
            "outcomes": _outcomes(dels),
        }

    write_json_atomic(
        d / "result.json",
        {
            "config": {"k": k, "seed": seed, "steps": steps},
            "start": ev(fs_start, 1),
            "final": ev(fs_final, 9),
            "wall_s": 2.0,
        },
    )
    with open(d / "metrics.jsonl", "w") as f:
        for step, fs in ((0, fs_start), (steps, fs_final)):
            f.write(json.dumps({"step": step, **ev(fs, 5)}) + "\n")


@pytest.fixture
def runs_dir(tmp_path):
    for seed, fs in ((0, 0.6), (1, 0.4)):
        _run(tmp_path, "visible", seed, 4, 0.1, fs)
        _run(tmp_path, "audit_100", seed, 4, 0.1, fs / 10)
        _run(tmp_path, "audit_10", seed, 4, 0.1, fs / 2)
        _run(tmp_path, "visible_k8", seed, 8, 0.1, fs + 0.2)
    return tmp_path


def test_table_reads_the_numbers_from_the_files(runs_dir):
    table = {r["setting"]: r for r in summary_table(load_runs(runs_dir))}
    vis = table["visible"]
    assert vis["final_false_success"]["mean"] == pytest.approx(0.5)
    assert vis["final_false_success"]["std"] == pytest.approx(0.1)
    assert vis["final_false_success"]["per_seed"] == [0.6, 0.4]
    assert table["audit_100"]["final_false_success"]["mean"] == pytest.approx(0.05)
    assert vis["writeup"]["false_success"] == 0.56  # the write-up's figure beside ours
    assert [r["setting"] for r in summary_table(load_runs(runs_dir))] == [
        "visible",
        "audit_10",
        "audit_100",
        "visible_k8",
    ]


def test_report_page_has_the_figures_and_table(runs_dir):
    page = build_report(runs_dir)
    html = page.read_text()
    for fig in (
        "fig1_training.png",
        "fig2_untested_outcomes.png",
        "fig3_audit_rate.png",
        "fig4_broken_branches.png",
        "fig5_before_after.png",
    ):
        assert (page.parent / fig).stat().st_size > 1000
        assert fig in html
    assert "0.500 ± 0.100" in html and "0.600 · 0.400" in html
    assert json.loads((page.parent / "table.json").read_text())[0]["setting"] == "visible"


def test_report_cli_json_and_errors(runs_dir, tmp_path_factory):
    runner = CliRunner()
    res = runner.invoke(app, ["report", str(runs_dir), "--json"])
    assert res.exit_code == 0
    assert json.loads(res.output)[0]["final_false_success"]["mean"] == pytest.approx(0.5)
    empty = tmp_path_factory.mktemp("empty")
    res = runner.invoke(app, ["report", str(empty)])
    assert res.exit_code == 2 and "verigap pilot" in res.output
    with pytest.raises(ConfigError):
        load_runs(empty / "missing")


def test_the_numerics_view_sets_old_beside_new_per_setting_in_sweep_order():
    from verigap.report.views import get_view

    def cell(old: float, new: float) -> dict[str, float]:
        return {
            f"{arm}_{m}": v
            for arm, v in (("old", old), ("new", new))
            for m in ("visible_pass", "true_success", "false_success")
        }

    per_setting = {
        "visible_k10": cell(0.007, 0.009),
        "audit_10": cell(0.32, 0.30),
        "visible": cell(0.658, 0.641),
        "visible_k2": cell(0.74, 0.75),
    }
    table = get_view("pilot_numerics")({"per_setting": per_setting})
    lines = table.splitlines()
    assert lines[0].startswith("| setting | visible pass old → new |")
    firsts = [line.split("|")[1].strip() for line in lines[2:]]
    assert firsts == [
        "visible checks only",
        "audits 10%",
        "visible only, k = 2",
        "visible only, k = 10",
    ]
    assert "| 0.658 → 0.641 |" in lines[2] and "pass 0.58, true 0.02, false 0.56" in lines[2]
    assert lines[3].endswith('| "gets partway" |')


def test_the_profile_view_lists_phases_first_then_calls_with_shares_of_each_group():
    from verigap.report.views import get_view

    data = {
        "groups": [
            {
                "k": 10,
                "runs": 3,
                "cpu_s": 40.0,
                "cpu_s_by": {"call: Adam step": 8.0, "phase: GRPO steps": 10.0, "phase: SFT": 30.0},
            },
            {
                "k": 4,
                "runs": 8,
                "cpu_s": 20.0,
                "cpu_s_by": {"call: Adam step": 4.0, "phase: GRPO steps": 15.0, "phase: SFT": 5.0},
            },
        ]
    }
    lines = get_view("pilot_profile")(data).splitlines()
    assert lines[0] == (
        "| where | k = 10 (3 runs), CPU-s | share | k = 4 (8 runs), CPU-s | share |"
    )
    assert lines[2] == "| phase: SFT | 30.0 | 75% | 5.0 | 25% |"
    assert lines[3] == "| phase: GRPO steps | 10.0 | 25% | 15.0 | 75% |"
    assert lines[4] == "| call: Adam step | 8.0 | 20% | 4.0 | 20% |"
    assert lines[5] == "| whole group | 40.0 | 100% | 20.0 | 100% |"
