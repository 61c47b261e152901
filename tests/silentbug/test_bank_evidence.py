"""The bank's evidence: interaction bugs gated by ablation, honest run timing, and the one
committed calibration (``src/verigap/silentbug/bugs/*.json``: the scorer reads it at runtime,
the docs read it through markers) agreeing with the registry. No training here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.silentbug.ablation import run_timing
from verigap.silentbug.bank import bugs_dir, load_registry, parse_registry
from verigap.silentbug.calibrate import judge, read_baselines
from verigap.silentbug.stats import Arm

ROOT = Path(__file__).resolve().parents[2]
REG = load_registry()
BUGS = {b.id: b for b in REG.bugs}
CLEAN, BAD = Arm((170.0, 175.0, 180.0)), Arm((20.0, 22.0, 24.0))

ENTRY = """bugs:
  - id: x
    substrate: acrobot_modular
    file: ppo_modular/advantage.py
    class: {cls}
    component: advantage_normalization
    split: train
    {mech}
    patch: acrobot_adv_std_floor.diff
    ground_truth_lines: [32]
    symptom: s
    description: d
    diagnostic_metrics: [episode_return]
"""


def test_an_interaction_bug_naming_a_mechanism_is_refused_unless_it_is_load_bearing():
    bug = BUGS["acrobot_adv_std_floor"]
    assert bug.bug_class == "interaction" and bug.mechanism == "adv_norm"
    assert judge(bug, CLEAN, BAD, ("ok",) * 3, False)[1] == "refused"
    assert judge(bug, CLEAN, BAD, ("ok",) * 3, None)[1] == "refused"  # no ablation row at all
    assert judge(bug, CLEAN, BAD, ("ok",) * 3, True)[1] == "accepted"
    # an interaction without a mechanism is judged by its own runs only
    plain = BUGS["modular_targets_from_standardized"]
    assert plain.mechanism is None
    assert judge(plain, CLEAN, BAD, ("ok",) * 3, None)[1] == "accepted"


def test_mechanism_is_refused_on_classes_it_cannot_gate_and_unknown_ablations():
    assert parse_registry(ENTRY.format(cls="interaction", mech="mechanism: adv_norm"))
    with pytest.raises(ConfigError, match="gates only omission and interaction"):
        parse_registry(ENTRY.format(cls="wrong_line", mech="mechanism: adv_norm"))
    with pytest.raises(ConfigError, match="must name the 'mechanism'"):
        parse_registry(ENTRY.format(cls="omission", mech=""))
    with pytest.raises(ConfigError, match="field 'mechanism'"):
        parse_registry(ENTRY.format(cls="omission", mech="mechanism: optimizer_reset"))


def test_run_timing_separates_runs_executed_from_cached_ones():
    results = {
        "a": {"cpu_s": 10.0, "wall_s": 30.0},
        "b": {"cpu_s": 5.0, "wall_s": 8.0},
        "c": {"cpu_s": None, "wall_s": 1.0},
    }
    t = run_timing(results, {"b"})
    assert (t["runs_cpu_s"], t["runs_wall_s"]) == (15.0, 39.0)
    assert (t["executed_cpu_s"], t["executed_wall_s"], t["runs_cached"]) == (5.0, 8.0, 2)
    assert len(t["loadavg"]) == 3


# ---- the committed calibration: one copy, strict, with provenance, matching the registry


def _doc(name: str) -> dict:
    def refuse(token: str) -> float:
        raise AssertionError(f"{name} holds {token}: not strict JSON")

    return json.loads((bugs_dir() / name).read_text(), parse_constant=refuse)


@pytest.mark.parametrize("name", ["baselines.json", "ablation.json"])
def test_committed_calibration_is_a_strict_results_file_with_provenance(name):
    doc = _doc(name)
    meta = doc["meta"]
    assert meta["command"].startswith("verigap silentbug ")
    assert {"python", "numpy", "torch", "gymnasium"} <= set(meta["versions"])
    assert meta["machine"]["cpus"] and meta["machine"]["platform"]
    timing = doc["data"]["timing"]
    assert doc["data"]["runs_executed"] + timing["runs_cached"] == doc["data"]["runs_total"]
    assert timing["runs_cpu_s"] >= timing["executed_cpu_s"] >= 0


def test_calibration_lives_in_one_place():
    # the scorer reads the package copy (a wheel has no results/ dir); nothing else may hold one
    assert not list((ROOT / "results").rglob("baselines.json"))
    assert not list((ROOT / "results").rglob("ablation.json"))
    page = (ROOT / "docs" / "silentbug.md").read_text()
    for view in ("silentbug_calibration", "silentbug_clean", "silentbug_bank"):
        assert f"src/verigap/silentbug/bugs/baselines.json view:{view}" in page
    assert "src/verigap/silentbug/bugs/ablation.json view:silentbug_ablation" in page


def test_committed_calibration_covers_the_registry_and_its_gates():
    cal = read_baselines()
    # none that is gone; an entry not yet calibrated is no task (not accepted) until it is
    assert set(cal["bugs"]) <= set(BUGS)
    assert set(read_baselines()["summary"]["accepted_ids"]) <= set(cal["bugs"])
    rows = {(a["substrate"], a["mechanism"]): a["load_bearing"] for a in cal["ablations"]}
    for bug_id, b in cal["bugs"].items():
        bug = BUGS[bug_id]
        assert (b["substrate"], b["class"], b["mechanism"]) == (
            bug.substrate,
            bug.bug_class,
            bug.mechanism,
        )
        if bug.mechanism:
            assert (b["verdict"] == "refused") == (not rows[(bug.substrate, bug.mechanism)])
        if b["verdict"] == "accepted":
            assert b["margin"] > 0 and b["margin"] >= b["threshold"]
            assert b["broken_status"] == ["ok"] * len(cal["seeds"])  # silent: nothing crashed
    # the ablation file and the calibration agree where they measured the same arm
    for r in _doc("ablation.json")["data"]["rows"]:
        if (r["substrate"], r["mechanism"]) in rows:
            assert rows[(r["substrate"], r["mechanism"])] == r["load_bearing"]


def _cal(bugs: dict, rows: list, seeds=(1, 2, 3)) -> dict:
    return {
        "seeds": list(seeds),
        "bugs": bugs,
        "ablations": rows,
        "substrates": {
            s: {"clean": {"mean": 1.0}} for s in {b["substrate"] for b in bugs.values()}
        },
        "summary": {},
        "wall_s": 1.0,
    }


def test_merge_keeps_uncalibrated_bugs_with_their_own_provenance():
    from verigap.silentbug.calibrate import merge_calibration

    old = _cal(
        {
            "a": {"substrate": "s", "verdict": "accepted"},
            "b": {"substrate": "s", "verdict": "rejected"},
        },
        [{"substrate": "s", "mechanism": "m", "load_bearing": False}],
    )
    new = _cal(
        {
            "b": {"substrate": "s", "verdict": "accepted"},
            "c": {"substrate": "t", "verdict": "refused"},
        },
        [{"substrate": "s", "mechanism": "m", "load_bearing": True}],
    )
    merged = merge_calibration(
        old, {"command": "old", "argv": []}, new, {"command": "new", "argv": ["x"]}
    )
    assert merged["summary"] == {
        "bugs": 3,
        "accepted": 2,
        "rejected": 0,
        "refused": 1,
        "accepted_ids": ["a", "b"],
    }
    assert merged["bugs"]["a"]["calibrated_by"] == {"command": "old"}
    assert merged["bugs"]["b"]["calibrated_by"] == {"command": "new"}
    assert [r["load_bearing"] for r in merged["ablations"]] == [True]  # replaced, not doubled
    assert set(merged["substrates"]) == {"s", "t"}
    assert merged["invocations"] == []  # neither side recorded its timing
    timed = {**new, "timing": {"runs_cpu_s": 2.0}, "runs_executed": 1}
    again = merge_calibration(merged, {"command": "mid"}, timed, {"command": "last"})
    assert [i["command"] for i in again["invocations"]] == ["last"]
    third = merge_calibration(again, {"command": "last"}, timed, {"command": "third"})
    assert [i["command"] for i in third["invocations"]] == ["last", "third"]
    with pytest.raises(ConfigError, match="seeds"):
        merge_calibration(old, {}, _cal({}, [], seeds=(1, 2)), {})


def _mark_and_return(run_dir: Path, marker: str) -> dict:
    Path(marker).write_text("ran")
    return {"ran": True}


def test_a_run_another_sweep_is_finishing_is_read_not_trained_twice(tmp_path):
    """Two calibrations sharing a cache found the same run missing and both trained it into
    one run dir; the interleaved metrics.jsonl gave a wrong score. Now the second waits on
    the run's lock and reads the first one's result."""
    import fcntl
    from concurrent.futures import ProcessPoolExecutor

    from verigap.runs import Job, _execute, write_json_atomic

    run_dir, marker = tmp_path / "run", tmp_path / "marker"
    job = Job("j", run_dir, _mark_and_return, {"marker": str(marker)})
    run_dir.mkdir()
    with open(tmp_path / "run.lock", "w") as lock, ProcessPoolExecutor(1) as pool:
        fcntl.flock(lock, fcntl.LOCK_EX)  # "the other sweep" is training this run
        fut = pool.submit(_execute, job)
        write_json_atomic(run_dir / "result.json", {"ran": "elsewhere"})
        fcntl.flock(lock, fcntl.LOCK_UN)
        assert fut.result(timeout=120) == ("j", {"ran": "elsewhere"})
    assert not marker.exists()


def test_the_committed_bank_keeps_what_issue_10_asks():
    """The bank's size: >= 12 accepted over >= 3 substrates, >= 3 accepted omissions over >= 2
    mechanisms (advantage normalization, removed in two places on Acrobot, and the GAE trace on
    CartPole), >= 1 accepted interaction and >= 1 statistical bug."""
    from verigap.silentbug.views import bank_counts

    c = bank_counts(read_baselines())
    assert c["accepted"] >= 12 and len(c["substrates"]) >= 3, c
    assert c["by_class"].get("interaction") and c["by_class"].get("statistical"), c
    assert sum(c["by_class"].get("omission", {}).values()) >= 3, c
    assert c["omission_mechanisms"] == ["adv_norm", "gae_trace"], c
