"""What makes v2 cheaper keeps its verdicts: the cached task base is checked on use,
the reference's answers are computed once per reference tree, and the sandboxes running side
by side give the same verdict as one after another."""

from __future__ import annotations

from pathlib import Path

from verigap.repos import equivalence, sources
from verigap.repos.graders import v2
from verigap.repos.tasks import base_tree, materialize_workspace
from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]


def test_cached_base_matches_a_fresh_build_and_is_rebuilt_when_changed(fixture_tasks, tmp_path):
    _, tasks, p = fixture_tasks
    t = tasks[0]
    fresh = sources.tree_hash(base_tree(p, t, tmp_path / "fresh", with_hidden=True))
    cached = v2.pristine_base(p, t, with_hidden=True)
    assert sources.tree_hash(cached) == fresh
    assert sources.tree_hash(v2.pristine_base(p, t, with_hidden=False)) != fresh  # no hidden
    victim = cached / t.sites[0].file
    victim.write_text(victim.read_text() + "\nANSWER = 42\n")  # the cache changed under us
    again = v2.pristine_base(p, t, with_hidden=True)
    assert sources.tree_hash(again) == fresh
    assert "ANSWER = 42" not in (again / t.sites[0].file).read_text()


def test_reference_answers_are_computed_once_per_reference_tree(fixture_tasks, monkeypatch):
    _, tasks, p = fixture_tasks
    inputs = [x.model_dump() for x in tasks[1].equivalence[:6]]
    calls: list[str] = []
    real = equivalence.run_equiv

    def counting(tree, *a, **kw):
        calls.append("reference" if Path(tree) == Path(p.tree) else "candidate")
        return real(tree, *a, **kw)

    monkeypatch.setattr(equivalence, "run_equiv", counting)
    monkeypatch.setattr(
        equivalence,
        "_ref_path",
        lambda sha, inp, c, real_path=equivalence._ref_path: real_path("test-" + sha, inp, c),
    )  # a key no other test has warmed
    cand = v2.pristine_base(p, tasks[1], with_hidden=True)
    first = equivalence.check(p, p.tree, cand, inputs)
    # the reference runs once in plain and twice in the agent context (a random hash seed
    # there: answers that differ between its two runs are not compared)
    assert sorted(calls) == ["candidate", "candidate", "reference", "reference", "reference"]
    calls.clear()
    second = equivalence.check(p, p.tree, cand, inputs)
    assert calls == ["candidate", "candidate"]  # the reference's answers came from the cache
    assert (first.matched, first.per_target) == (second.matched, second.per_target)
    assert first.total == 6 and first.matched < 6  # the base is the mutant: it mismatches


def test_side_by_side_and_serial_sandboxes_give_the_same_verdict(fixture_tasks, tmp_path):
    _, tasks, p = fixture_tasks
    t = tasks[0]
    ws = materialize_workspace(p, t, tmp_path / "ws")
    for s in t.sites:
        (ws / s.file).write_text((p.tree / s.file).read_text())
    a = v2.evaluate(t, ws, prepared=p)
    b = v2.evaluate(t, ws, prepared=p, parallel=False)
    assert a.correct and b.correct
    assert (a.checks, a.hacks, a.outcomes, a.status) == (b.checks, b.hacks, b.outcomes, b.status)
    assert {"pytest_s", "equivalence_s", "sandboxes_s"} <= set(a.detail["timings"])


def test_speed_results_are_consistent():
    data = read_result(ROOT / "results" / "repos" / "v2_speed.json")
    assert [s["source"] for s in data["sets"]] == [
        "fixture_lib",
        "inflection==0.5.1",
        "toolz==1.0.0",
    ]
    for s in data["sets"]:
        assert s["n_tasks"] == len(s["tasks"]) >= 1
        for r in s["tasks"]:
            assert r["correct"] is True  # the oracle: v2 must pay it for the timing to count
            assert abs(r["ratio"] - r["v2_s"] / r["raw_pytest_s"]) < 0.01
            assert len(r["load_avg_1m"]) == data["reps"]
            # the detectors read the change beside the sandboxes: little is left after them
            assert r["v2_parts_s"]["after_sandboxes_s"] < 0.1 * r["v2_parts_s"]["total_s"]
    # docs/exploits.md and docs/speed.md say v2, as it grades, is within the speed goal (1.5x)
    # on all three sets (toolz, with a site whose tests go through the channel, included)
    within = [s["source"] for s in data["sets"] if s["wall_ratio_median"] <= 1.5]
    assert within == ["fixture_lib", "inflection==0.5.1", "toolz==1.0.0"]
