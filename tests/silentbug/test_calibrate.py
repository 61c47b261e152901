"""Acceptance rule on synthetic numbers; cached runs; the subprocess workspace path."""

import math

import pytest

from verigap.runs import run_jobs
from verigap.silentbug.bank import load_registry
from verigap.silentbug.calibrate import judge
from verigap.silentbug.runner import plan_run, score_episodes
from verigap.silentbug.stats import Arm, gap
from verigap.silentbug.substrate import content_hash, pristine_files

BUGS = {b.id: b for b in load_registry().bugs}
WRONG = BUGS["single_recomputed_old_logprob"]
OMIT = BUGS["acrobot_grad_clip_omitted"]


def test_rule_accepts_only_gaps_above_three_times_the_larger_std():
    clean = Arm((170.0, 175.0, 180.0))  # std 5
    assert gap(clean, Arm((20.0, 22.0, 24.0))).clears
    g = gap(clean, Arm((150.0, 160.0, 170.0)))  # margin 15, threshold 3 * 10 = 30
    assert g.margin == pytest.approx(15.0) and g.threshold == pytest.approx(30.0)
    assert not g.clears
    # exactly at the threshold clears; a negative margin (broken is better) never does
    assert gap(Arm((10.0, 12.0, 14.0)), Arm((4.0, 4.0, 4.0))).clears
    assert not gap(Arm((100.0, 100.0, 100.0)), Arm((300.0, 300.0, 300.0))).clears
    assert not gap(Arm((100.0,)), Arm((0.0,))).clears  # one seed: no spread to compare


def test_seed_003_omission_table_is_rejected_by_the_rule():
    # seed 003's grad_clip_omitted_v1: clean 176.8, broken 318.0, margin -141.2
    g = gap(Arm((176.8, 170.0, 183.6)), Arm((318.0, 271.3, 364.7)))
    assert g.margin == pytest.approx(-141.2) and not g.clears


def test_judge_verdicts():
    clean, bad = Arm((170.0, 175.0, 180.0)), Arm((20.0, 22.0, 24.0))
    assert judge(WRONG, clean, bad, ("ok",) * 3, None)[1] == "accepted"
    assert judge(WRONG, clean, clean, ("ok",) * 3, None)[1] == "rejected"
    assert judge(WRONG, clean, bad, ("ok", "crashed", "ok"), None)[1] == "rejected"
    assert judge(OMIT, clean, bad, ("ok",) * 3, False)[1] == "refused"
    assert judge(OMIT, clean, bad, ("ok",) * 3, True)[1] == "accepted"


def test_score_uses_the_last_fifth_of_the_steps():
    eps = [
        {"kind": "episode", "global_step": s, "return": r}
        for s, r in [(100, 1.0), (850, 10.0), (1000, 20.0)]
    ]
    assert score_episodes(eps, 1000) == (15.0, 2)
    assert score_episodes(eps[:1], 1000) == (1.0, 1)  # none late: fall back to the last ones
    assert math.isnan(score_episodes([], 1000)[0])


TINY = {"total_timesteps": 1024, "num_steps": 64}


def test_cache_hit_on_unchanged_workspace_and_miss_on_a_change(tmp_path):
    files = pristine_files()
    job = plan_run(tmp_path, "cartpole_single", "clean", files, TINY, seed=3)
    first = run_jobs([job], executor="serial", progress=False)[job.name]
    assert first["status"] == "ok" and first["iterations"] == 4, first
    stamp = (job.run_dir / "metrics.jsonl").stat().st_mtime_ns

    again = plan_run(tmp_path, "cartpole_single", "clean", dict(files), TINY, seed=3)
    assert again.run_dir == job.run_dir
    assert run_jobs([again], executor="serial", progress=False)[job.name] == first
    assert (job.run_dir / "metrics.jsonl").stat().st_mtime_ns == stamp  # not rerun

    edited = dict(files)
    edited["ppo_single.py"] += "\n# a comment changes the workspace\n"
    assert plan_run(tmp_path, "cartpole_single", "clean", edited, TINY, 3).run_dir != job.run_dir
    assert plan_run(tmp_path, "cartpole_single", "clean", files, TINY, 4).run_dir != job.run_dir


def test_content_hash_depends_on_files_and_config():
    files = {"a.py": "x = 1\n"}
    assert content_hash(files, {"seed": 1}) == content_hash(dict(files), {"seed": 1})
    assert content_hash(files, {"seed": 1}) != content_hash(files, {"seed": 2})
    assert content_hash(files, {"seed": 1}) != content_hash({"a.py": "x = 2\n"}, {"seed": 1})


def test_broken_workspace_runs_patched_copy_and_pristine_is_untouched(tmp_path):
    from verigap.silentbug.bank import broken_files
    from verigap.silentbug.substrate import substrate_root

    before = (substrate_root() / "ppo_single.py").read_text()
    job = plan_run(tmp_path, "cartpole_single", WRONG.id, broken_files(WRONG), TINY, seed=1)
    result = run_jobs([job], executor="serial", progress=False)[job.name]
    assert result["status"] == "ok"
    assert "oldlogprob" in (job.run_dir / "workspace/substrates/ppo_single.py").read_text()
    assert (substrate_root() / "ppo_single.py").read_text() == before


def test_learning_curve_bins():
    from verigap.silentbug.runner import learning_curve

    eps = [
        {"kind": "episode", "global_step": s, "return": r}
        for s, r in [(10, 1.0), (30, 3.0), (90, 9.0), (100, 11.0)]
    ]
    curve = learning_curve(eps, 100, bins=4)
    assert curve[0] == 1.0 and curve[1] == 3.0 and math.isnan(curve[2]) and curve[3] == 10.0


@pytest.mark.slow
def test_calibrate_end_to_end_on_tiny_budgets(tmp_path, monkeypatch):
    """The whole pipeline with 1024-step runs: clean, ablation, broken, verdicts, baselines.json."""
    import dataclasses

    from verigap.results import read_meta
    from verigap.silentbug import substrate
    from verigap.silentbug.bank import Registry
    from verigap.silentbug.calibrate import calibrate, read_baselines

    for name in ("cartpole_single", "cartpole_modular"):
        sub = substrate.SUBSTRATES[name]
        tiny = {**sub.config, "total_timesteps": 1024}
        monkeypatch.setitem(substrate.SUBSTRATES, name, dataclasses.replace(sub, config=tiny))
    reg = Registry(bugs=[BUGS["single_recomputed_old_logprob"], BUGS["cartpole_entropy_omitted"]])
    out = tmp_path / "baselines.json"
    cal = calibrate(
        seeds=2,
        cache_dir=tmp_path / "cache",
        out=out,
        registry=reg,
        executor="serial",
        progress=False,
    )
    data = read_baselines(out)  # a strict-JSON results file with provenance
    assert read_meta(out)["command"].startswith("verigap silentbug calibrate")
    assert set(data["bugs"]) == {"single_recomputed_old_logprob", "cartpole_entropy_omitted"}
    assert len(data["substrates"]["cartpole_single"]["clean"]["scores"]) == 2
    assert [a["mechanism"] for a in data["ablations"]] == ["entropy_bonus"]
    omission = next(r for r in cal.results if r.bug.id == "cartpole_entropy_omitted")
    assert (omission.verdict == "refused") == (not cal.ablations[0].load_bearing)
    assert cal.runs_executed == cal.runs_total
    again = calibrate(
        seeds=2, cache_dir=tmp_path / "cache", registry=reg, executor="serial", progress=False
    )
    assert again.runs_executed == 0  # everything cached
