"""The start probe's rates (benchmarks/lm_start_probe.py) on hand-built answers: what decides
whether a group of sampled answers gives GRPO anything to learn from."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trl")

from verigap.patchworld import rules, text  # noqa: E402
from verigap.patchworld.programs import generate  # noqa: E402


def _one_tested_and_one_untested() -> tuple[dict, dict]:
    progs = generate(1, 200, seed=5)
    tested = progs.at_order("tested")[:, 0]
    a = int(np.flatnonzero(tested)[0])
    b = int(np.flatnonzero(~tested)[0])
    return text.program_record(progs[a]), text.program_record(progs[b])


def test_score_counts_exact_values_passes_and_groups_whose_rewards_differ(benchmark_script):
    probe = benchmark_script("lm_start_probe")
    t, u = _one_tested_and_one_untested()
    pt, pu = text.program_from_record(t), text.program_from_record(u)
    ref_t = int(pt.at_order("reference")[0, 0])
    wrong_t = (ref_t + 5) % 32
    right = text.format_answer(pt, np.array([ref_t]))
    wrong = text.format_answer(pt, np.array([wrong_t]))
    delete = text.format_answer(pu, np.array([rules.DELETE]))
    # tested program: one exact, one wrong, one unparsable, one exact -> rewards differ
    # untested program: every answer deletes -> all pass, all wrong, rewards equal
    out = probe.score(
        [t, u], [[right, wrong, "no answer", right], [delete, delete, delete, delete]]
    )
    assert out["answer_parsed"] == 7 / 8
    assert out["tested_branch_exact"] == 2 / 3 and out["tested_branches_graded"] == 3
    assert out["visible_pass"] == 6 / 8 and out["false_success"] == 4 / 8
    assert out["groups_with_reward_variance"] == 0.5 and out["groups"] == 2
    # a group where nothing passes teaches nothing either
    none = probe.score([t], [[wrong, wrong, wrong, "x"]])
    assert none["groups_with_reward_variance"] == 0.0 and none["visible_pass"] == 0.0
