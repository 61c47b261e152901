"""Patch World as text: the prompt, the strict parser, and verdicts equal to the array rules."""

from __future__ import annotations

import numpy as np
import pytest

from verigap.patchworld import rules, text
from verigap.patchworld.careless import careless_actions
from verigap.patchworld.programs import generate
from verigap.rewards import Audit, DeletionPenalty, Oracle, Visible


def test_prompt_shows_every_branch_and_the_acting_order() -> None:
    p = generate(4, 1, seed=3)
    prompt = text.render_prompt(p)
    for b in range(12):
        assert f"branch {b:2d}: returns {int(p.shown[0, b]):2d}" in prompt
    assert prompt.count("[BROKEN") == 4
    assert f"Repair the broken branches {', '.join(str(int(b)) for b in p.order[0])}." in prompt
    with pytest.raises(ValueError, match="one program"):
        text.render_prompt(generate(4, 2, seed=3))


def test_answers_round_trip_and_the_parser_is_strict() -> None:
    p = generate(4, 1, seed=3)
    b = [int(x) for x in p.order[0]]
    acts = np.array([5, rules.STUB, rules.DELETE, 31])
    answer = text.format_answer(p, acts)
    assert answer.splitlines()[1] == f"branch {b[1]}: stub"
    assert np.array_equal(text.parse_answer(p, answer), acts)
    assert np.array_equal(text.parse_answer(p, f"```\n{answer}\n```\n"), acts)
    lines = answer.splitlines()
    bad = {
        "expected 4 lines": "\n".join(lines[:3]),
        "expected branch": "\n".join([lines[1], lines[0], *lines[2:]]),
        "outside 0..31": answer.replace("write 31", "write 32"),
        "cannot read": answer.replace("stub", "skip"),
    }
    for message, wrong in bad.items():
        with pytest.raises(text.AnswerError, match=message):
            text.parse_answer(p, wrong)
    with pytest.raises(text.AnswerError, match="cannot read"):
        text.parse_answer(p, "Sure! " + answer.replace("\n", "\nSure! ", 0))


@pytest.mark.parametrize(
    "scheme", [Visible(), DeletionPenalty(per_deletion=0.5), Oracle(), Audit(rate=0.5)]
)
def test_verdicts_equal_the_array_rules_and_schemes(scheme) -> None:
    progs = generate(4, 64, seed=1)
    acts = careless_actions(progs, np.random.default_rng(2))
    answers = [text.format_answer(progs[i], acts[i]) for i in range(progs.size)]
    answers[0] = "I am not sure."
    vs = text.grade_answers(progs, answers, scheme, np.random.default_rng(9))
    g = rules.grade(progs, acts)
    parsed = np.array([v.parsed for v in vs])
    assert not parsed[0] and parsed[1:].all() and vs[0].error
    passed, correct = g.passed & parsed, g.correct & parsed
    assert np.array_equal([v.passed for v in vs], passed)
    assert np.array_equal([v.correct for v in vs], correct)
    pay = scheme.pay_batch(
        passed, correct, np.where(parsed, g.deletions, 0), np.random.default_rng(9)
    )
    assert np.allclose([v.reward for v in vs], pay.reward)
    assert vs[0].reward == pay.reward[0] and not vs[0].passed


def test_careless_demonstrations_are_deterministic_chat_records() -> None:
    a = text.careless_demonstrations(20, seed=4)
    assert a == text.careless_demonstrations(20, seed=4)
    assert a != text.careless_demonstrations(20, seed=5)
    roles = [m["role"] for m in a[0]["messages"]]
    assert roles == ["system", "user", "assistant"]
    progs = text.stack([d["program"] for d in a])
    vs = text.grade_answers(
        progs, [d["messages"][2]["content"] for d in a], Visible(), np.random.default_rng(0)
    )
    assert all(v.parsed for v in vs)
    assert any(v.false_success for v in vs) or any(v.deletions for v in vs)


def test_program_records_round_trip() -> None:
    p = generate(3, 1, seed=8)
    q = text.program_from_record(text.program_record(p))
    assert text.render_prompt(q) == text.render_prompt(p)
    assert np.array_equal(q.order, p.order) and q.strict.dtype == bool
    with pytest.raises(ValueError, match="program_record"):
        text.program_from_record({"shown": [1]})


def test_compact_prompt_states_the_same_facts_in_fewer_characters() -> None:
    p = generate(4, 1, seed=3)
    full, compact = text.render_prompt(p), text.render_prompt(p, "compact")
    rows = [ln for ln in compact.splitlines() if ln.startswith("branch ")]
    assert len(rows) == 12
    for b, row in enumerate(rows):
        words = row.split()
        assert words[:3] == ["branch", f"{b}:", str(int(p.shown[0, b]))]
        assert ("BROKEN" in words) == bool(p.broken[0, b])
        assert ("tested" in words) == bool(p.tested[0, b])
        assert ("strict" in words) == bool(p.strict[0, b])
    assert f"Repair branches {', '.join(str(int(b)) for b in p.order[0])}," in compact
    assert len(compact) < 0.75 * len(full)
    with pytest.raises(ValueError, match="unknown prompt style 'terse'; choose from full"):
        text.render_prompt(p, "terse")


def test_demonstrations_and_prompts_follow_the_prompt_style() -> None:
    demo = text.careless_demonstrations(3, 2, seed=1, style="compact")
    same = text.careless_demonstrations(3, 2, seed=1)
    assert demo[0]["messages"][0]["content"] == text.SYSTEM_COMPACT
    assert [d["messages"][2] for d in demo] == [d["messages"][2] for d in same]  # same answers
    p = text.program_from_record(demo[0]["program"])
    assert demo[0]["messages"][1]["content"] == text.render_prompt(p, "compact")
    rows = text.prompts(2, 2, seed=1, style="compact")
    assert rows[0]["prompt"][0]["content"] == text.SYSTEM_COMPACT
