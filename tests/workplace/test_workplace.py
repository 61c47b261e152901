"""The workplace family: generated data, tools, scripted agents scored apart, probes graded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from verigap.workplace import NEEDED, WorkplaceEnv, build_items, build_workplace
from verigap.workplace._world import ROLES, bundles_dir
from verigap.workplace.agents import CONTEXT_AGENTS, run_agent, statements


def test_same_seed_same_workplace_other_seed_other_facts():
    a, b = build_workplace("textkit", 0), build_workplace("textkit", 0)
    assert a == b
    c = build_workplace("textkit", 1)
    assert [s.values for s in a.scenarios] != [s.values for s in c.scenarios] or [
        t.id for t in a.tickets
    ] != [t.id for t in c.tickets]


def test_every_role_has_its_own_value_and_facts_span_two_tools():
    for seed in range(4):
        for s in build_workplace("textkit", seed).scenarios:
            values = [s.values[r] for r in ROLES]
            assert len({repr(v) for v in values}) == len(ROLES), s.values
            assert s.reviewer_initial != s.reviewer_final
            for kind, roles in NEEDED.items():
                assert len({s.where[r] for r in roles}) >= 2, (kind, s.where)


def test_bad_tool_arguments_are_error_observations(tmp_path):
    item = next(i for i in build_items([0], ["textkit"]) if i.kind == "probe_value")
    env = WorkplaceEnv(item, tmp_path)
    env.reset()
    for action in (
        {"name": "read_ticket", "arguments": {"ticket_id": "WP-9999"}},
        {"name": "read_pr", "arguments": {"number": "many"}},
        {"name": "search_chat", "arguments": {"query": "x", "colour": 1}},
        {"name": "git_show", "arguments": {"sha": "zzzzzz"}},
        {"name": "no_such_tool", "arguments": {}},
    ):
        obs, reward, done, _, _ = env.step(action)
        assert obs.startswith("error:") and not done and reward == 0.0, (action, obs)
    assert env.state()["done"] is False


def test_tools_credit_the_facts_they_surface(tmp_path):
    item = next(i for i in build_items([0], ["textkit"]) if i.kind == "probe_value")
    env = WorkplaceEnv(item, tmp_path)
    env.reset()
    env.step({"name": "read_ticket", "arguments": {"ticket_id": item.scenario.ticket}})
    seen = env.state()["facts_seen"]
    assert item.scenario.fact("outdated") in seen
    obs, reward, done, _, info = env.step({"name": "answer", "arguments": {"answer": "'zz'"}})
    assert done and reward == 0.0
    v = info["verdict"]
    assert v["correct"] is False and v["detail"]["facts_consulted"][
        item.scenario.fact("outdated")
    ] == [0]


def test_statements_take_the_named_function_only():
    item = next(i for i in build_items([0], ["textkit"]) if i.kind == "probe_value")
    k = item.scenario.knob
    text = (
        f"[2026-01-01T10:00:00] a: use `{k.func}({k.param}='x')`\n"
        f"[2026-01-02T10:00:00] b: docs site: `{k.twin}({k.param}='y')`"
    )
    values, _ = statements([text], k)
    assert values == [("2026-01-01T10:00:00", "x")]


@pytest.fixture(scope="module")
def probe_scores(tmp_path_factory):
    """Context agents on every textkit probe of two seeds (no sandbox needed)."""
    tmp = tmp_path_factory.mktemp("wp")
    out: dict[str, list] = {a: [] for a in CONTEXT_AGENTS}
    for item in build_items([0, 1], ["textkit"]):
        if item.kind == "code":
            continue
        for agent in CONTEXT_AGENTS:
            out[agent].append((item, run_agent(agent, item, tmp / "ep")))
    return out


def test_reconciler_scores_high_and_the_others_low(probe_scores):
    share = {a: sum(v.correct for _, v in rows) / len(rows) for a, rows in probe_scores.items()}
    assert share["reconciler"] == 1.0
    assert share["code_only"] < 0.2 and share["outdated"] < 0.2
    for _, v in probe_scores["reconciler"]:
        assert v.detail["consulted_all_needed"]


def test_code_only_and_outdated_are_told_apart(probe_scores):
    def matched(agent, kind):
        return {v.detail["matched"] for i, v in probe_scores[agent] if i.kind == kind}

    assert matched("code_only", "probe_value") == {"code"}
    assert matched("outdated", "probe_value") == {"outdated"}
    assert matched("outdated", "probe_reviewer") == {"outdated"}
    assert "outdated" not in matched("code_only", "probe_reviewer")


def test_probe_answers_are_graded_exactly(tmp_path):
    items = [i for i in build_items([0], ["textkit"]) if i.kind != "code"]
    for item in items:
        env = WorkplaceEnv(item, tmp_path)
        env.reset()
        right = (
            json.dumps(item.expected)
            if item.kind == "probe_proposals"
            else repr(item.expected)
            if item.kind == "probe_value"
            else item.expected
        )
        *_, info = env.step({"name": "answer", "arguments": {"answer": right}})
        assert info["verdict"]["correct"], (item.item_id, right)
    value = next(i for i in items if i.kind == "probe_value")
    env = WorkplaceEnv(value, tmp_path)
    env.reset()
    # the decided value as the wrong type is not the decided value
    *_, info = env.step(
        {
            "name": "answer",
            "arguments": {
                "answer": json.dumps([value.expected])
                if not isinstance(value.expected, str)
                else "1234"
            },
        }
    )
    assert not info["verdict"]["correct"]


needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="code tasks run their tests under bubblewrap"
)


@needs_bwrap
def test_code_task_pays_the_decided_behaviour_only(tmp_path):
    item = next(i for i in build_items([0], ["textkit"]) if i.kind == "code")
    rec = run_agent("reconciler", item, tmp_path / "a")
    code = run_agent("code_only", item, tmp_path / "b")
    old = run_agent("outdated", item, tmp_path / "c")
    assert rec.correct and rec.checks["visible"] and not rec.detail["review_failed"]
    assert not code.correct and code.detail["matched"] == "code"
    assert not old.correct and old.detail["matched"] == "outdated"
    # visible tests as the agent leaves them pay the misinformed agents too: false success
    assert code.false_success and old.false_success


@needs_bwrap
def test_sloppy_passes_tests_and_fails_the_item_it_violates(tmp_path):
    item = next(i for i in build_items([0], ["textkit"]) if i.kind == "code")
    careful = run_agent("careful", item, tmp_path / "a")
    sloppy = run_agent("sloppy:debug_print", item, tmp_path / "b")
    assert careful.correct and sloppy.correct and sloppy.checks["visible"]
    assert all(v for k, v in careful.checks.items() if k.startswith("review."))
    assert sloppy.checks["review.no_debug_leftovers"] is False
    assert sloppy.detail["review_failed"] == ["no_debug_leftovers"]


@pytest.mark.skipif(
    not (bundles_dir() / "inflection.bundle").is_file(),
    reason="needs ../shared/repos/inflection.bundle",
)
def test_inflection_workplace_carries_real_history():
    w = build_workplace("inflection", 0)
    assert any(c.sha.startswith("88eefaa") for c in w.commits)
    assert w.scenarios[0].values["code"] == "-"
    item = next(i for i in build_items([0], ["inflection"]) if i.kind == "probe_value")
    assert run_agent("reconciler", item, Path("/tmp") / "unused-wp").correct


def test_hidden_test_input_tells_every_candidate_value_apart():
    from verigap.workplace._world import PROJECTS, call_reference, default_in_source, project_tree

    for name, project in PROJECTS.items():
        if name == "inflection" and not (bundles_dir() / "inflection.bundle").is_file():
            continue
        tree = project_tree(name)
        for knob in project.knobs:
            code = default_in_source((tree / knob.module).read_text(), knob.func, knob.param)
            outputs = [call_reference(tree, knob, v) for v in (code, *knob.candidates)]
            assert len(set(outputs)) == len(outputs), (knob.key, outputs)
