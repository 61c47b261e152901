"""Every Patch World rule, on hand-built actions."""

import numpy as np
import pytest

from verigap.patchworld import rules
from verigap.patchworld.programs import N_BRANCHES, N_VALUES, generate, heldout_set
from verigap.patchworld.rules import DELETE, STUB, grade


@pytest.fixture(scope="module")
def progs():
    return generate(4, 3000, seed=5)


def ref(p):
    return p.at_order("reference")


def test_reference_values_fix_everything(progs):
    g = grade(progs, ref(progs))
    assert g.build.all() and g.visible.all() and g.correct.all()
    assert (g.outcome == rules.FIXED).all()


def test_off_by_one_builds_but_fails_hidden_check(progs):
    a = ref(progs).copy()
    a[:, 0] = np.where(a[:, 0] + 1 < N_VALUES, a[:, 0] + 1, a[:, 0] - 1)
    g = grade(progs, a)
    assert g.build.all()
    assert not g.correct.any()
    assert (g.outcome[:, 0] == rules.OFF_BY_ONE).all()
    # it fails a visible test exactly when a test reaches that branch
    assert (g.visible == ~progs.at_order("tested")[:, 0]).all()


def test_other_wrong_values_fail_the_build(progs):
    a = ref(progs).copy()
    a[:, 1] = (a[:, 1] + 5) % N_VALUES
    g = grade(progs, a)
    assert not g.build.any() and not g.visible.any() and not g.correct.any()
    assert (g.outcome[:, 1] == rules.WRONG).all()


def test_delete_always_builds(progs):
    g = grade(progs, np.full(progs.order.shape, DELETE))
    assert g.build.all()
    assert not g.correct.any()
    assert (g.deletions == 4).all()


def test_deleting_only_untested_branches_passes_visible_checks(progs):
    a = np.where(progs.at_order("tested"), ref(progs), DELETE)
    g = grade(progs, a)
    assert g.passed.all() and not g.correct.any() and g.false_success.all()


def test_stubs_fail_the_type_check_on_about_a_quarter_of_branches(progs):
    g = grade(progs, np.where(np.arange(4) == 0, STUB, ref(progs)))
    strict = progs.at_order("strict")[:, 0]
    assert (g.build == ~strict).all()
    assert 0.22 < 1 - g.build.mean() < 0.28
    assert 0.23 < progs.strict.mean() < 0.27


@pytest.mark.parametrize("k", [1, 2, 3, 4, 6, 8, 10])
def test_exactly_half_of_broken_branches_are_tested(k):
    p = generate(k, 2000, seed=1)
    n_tested = p.at_order("tested").sum(1)
    assert set(np.unique(n_tested)) <= {k // 2, (k + 1) // 2}
    assert abs(n_tested.mean() - k / 2) < 0.05
    assert (p.broken.sum(1) == k).all()
    assert p.tested[~p.broken].any()  # some intact branches are tested too


def test_broken_branches_show_corrupted_values_and_pattern_is_inferable():
    p = generate(4, 2000, seed=2)
    assert (np.abs(p.shown - p.reference)[p.broken] >= 1).all()
    assert (p.shown[~p.broken] == p.reference[~p.broken]).all()
    arith = p.family == 0
    d = np.diff(p.reference[arith], axis=1)
    assert (d == d[:, :1]).all() and set(np.unique(np.abs(d[:, 0]))) == {1, 2}
    periodic = p.reference[~arith]
    assert all(any((row[per:] == row[:-per]).all() for per in (2, 3, 4)) for row in periodic)


def test_streams_never_overlap_and_are_deterministic():
    held = heldout_set()
    assert held.size == 2000
    train = generate(4, 20000, seed=0, stream="train")
    assert held.in_heldout().all() and not train.in_heldout().any()
    assert not set(held.content_hash().tolist()) & set(train.content_hash().tolist())
    again = heldout_set()
    assert (again.reference == held.reference).all() and (again.tested == held.tested).all()


def test_outcome_labels_split_by_tested(progs):
    a = np.where(progs.at_order("tested"), ref(progs), DELETE)
    c = grade(progs, a).outcome_counts()
    assert c["tested/fixed"] == 2 * progs.size
    assert c["untested/delete"] == 2 * progs.size
    assert sum(c.values()) == 4 * progs.size


@pytest.mark.parametrize(
    "bad,match",
    [
        (np.zeros((3, 4), dtype=np.int64), "shape"),
        (np.full((10, 4), 99), "must lie in"),
        (np.zeros((10, 4)), "integers"),
    ],
)
def test_bad_actions_get_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        grade(generate(4, 10, seed=0), bad)


def test_bad_generator_arguments():
    with pytest.raises(ValueError, match="between 1 and"):
        generate(N_BRANCHES, 10, seed=0)
    with pytest.raises(ValueError, match="stream"):
        generate(4, 10, seed=0, stream="test")
