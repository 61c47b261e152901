"""The combination search: which valid mutations can share a task, counted exactly, and tried
compatible-first, so a pool that can make tasks makes them."""

from __future__ import annotations

import itertools

import pytest

from verigap.errors import ConfigError
from verigap.repos.combine import (
    NO_GROUPS,
    BodyGroups,
    Pool,
    elementary,
    held_out_units,
    k_values,
    visible_count,
)
from verigap.repos.tasks import split_tests
from verigap.repos.validate import ValidMutation


def vm(fn: str, idx: int, fails: list[str]) -> ValidMutation:
    return ValidMutation(
        file="pkg/m.py", qualname=fn, op="cmp", index=idx, fail_to_pass=fails, sha256=f"{fn}{idx}"
    )


class FakePrepared:
    """What split_tests reads: the passing tests, the reach map, and the shared-body groups
    (given here; on a prepared project they come from its test classes)."""

    def __init__(self, reach: dict[str, list[str]], groups: BodyGroups = NO_GROUPS) -> None:
        self.reach = reach
        self.passing = sorted({t for ts in reach.values() for t in ts})
        self.groups = groups


def brute_force(pool: Pool, p: FakePrepared, k: int) -> int:
    """Every ordered choice of sites in distinct functions, visible first, that split_tests
    (the function a built task is cut with) accepts."""
    n_vis = k // 2
    total = 0
    for combo in itertools.permutations(range(len(pool.sites)), k):
        sites = [pool.sites[i] for i in combo]
        if len({s.function for s in sites}) < k:
            continue
        vis, hid = combo[:n_vis], combo[n_vis:]
        if list(vis) != sorted(vis) or list(hid) != sorted(hid):
            continue  # a set per role, not an order
        if any(not pool.hidden_capable(i) for i in hid):
            continue
        total += split_tests(p, sites, n_vis, p.groups) is not None
    return total


# f and g share test unit t_fg, so hiding one hides the other's tests in that unit
REACH = {
    "pkg/m.py::f": ["t.py::t_f", "t.py::t_fg[1]", "t.py::t_fg[2]"],
    "pkg/m.py::g": ["t.py::t_g", "t.py::t_fg[1]"],
    "pkg/m.py::h": ["t.py::t_h[a]", "t.py::t_h[b]"],
    "pkg/m.py::C.meth": ["t.py::T::test_m", "t.py::T::test_n"],
}
SITES = [
    vm("f", 0, ["t.py::t_f", "t.py::t_fg[1]"]),
    vm("f", 1, ["t.py::t_fg[2]"]),
    vm("g", 0, ["t.py::t_fg[1]"]),  # only breaks the shared unit: never visible beside f hidden
    vm("g", 1, ["t.py::t_g", "t.py::t_fg[1]"]),
    vm("h", 0, ["t.py::t_h[a]", "t.py::t_h[b]"]),
    vm("C.meth", 0, ["t.py::T::test_m", "t.py::T::test_n"]),
]


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("min_hidden", [1, 2])
def test_upper_bound_is_the_exact_number_of_splittable_combinations(k, min_hidden):
    pool = Pool(SITES, REACH, min_hidden=min_hidden)
    count, capped = pool.upper_bound(k)
    assert not capped
    assert count == brute_force(pool, FakePrepared(REACH), k)
    assert count > 0  # the control: a pool that can split


def test_a_pool_that_cannot_split_has_bound_zero_and_yields_nothing():
    # every function is reached by the one shared unit: hiding any hides all visible tests
    reach = {f"pkg/m.py::{f}": ["t.py::t_all[1]", "t.py::t_all[2]"] for f in "abc"}
    sites = [vm(f, 0, ["t.py::t_all[1]", "t.py::t_all[2]"]) for f in "abc"]
    pool = Pool(sites, reach, min_hidden=1)
    assert pool.upper_bound(2) == (0, False)
    assert brute_force(pool, FakePrepared(reach), 2) == 0
    assert list(pool.combinations(2, seed=0)) == []


@pytest.mark.parametrize("k", [2, 3, 4])
def test_every_combination_yielded_splits_and_is_new(k):
    pool = Pool(SITES, REACH, min_hidden=1)
    p = FakePrepared(REACH)
    got = list(pool.combinations(k, seed=3))
    assert got, "a pool with splittable combinations yields some"
    keys = set()
    for combo in got:
        n_vis = k // 2
        assert len({s.function for s in combo}) == k
        assert split_tests(p, combo, n_vis, p.groups) is not None
        keys.add(
            (frozenset(s.sha256 for s in combo[:n_vis]), frozenset(s.sha256 for s in combo[n_vis:]))
        )
    assert len(keys) == len(got)
    assert len(got) <= pool.upper_bound(k)[0]


def test_the_first_tasks_spread_over_the_functions():
    pool = Pool(SITES, REACH, min_hidden=1)
    first = list(itertools.islice(pool.combinations(2, seed=0), 3))
    hidden = [combo[1].function for combo in first]
    assert len(set(hidden)) == 3, hidden


def test_an_unusable_site_is_checked_once_and_never_combined():
    pool = Pool(SITES, REACH, min_hidden=1)
    asked: list[int] = []
    bad = {4}  # h's only site

    def usable(i: int) -> bool:
        asked.append(i)
        return i not in bad

    got = list(pool.combinations(2, seed=1, usable=usable))
    assert got and all(s.function != "h" for combo in got for s in combo)
    assert len(asked) == len(set(asked))


def test_elementary_symmetric_polynomial():
    assert elementary([2, 3, 5], 0) == 1
    assert elementary([2, 3, 5], 1) == 10
    assert elementary([2, 3, 5], 2) == 2 * 3 + 2 * 5 + 3 * 5
    assert elementary([2, 3, 5], 3) == 30
    assert elementary([2], 2) == 0


def test_k_values():
    assert k_values(4) == [4]
    assert k_values("2-4") == [2, 3, 4]
    assert k_values("1-4") == [1, 2, 3, 4]
    for bad in ("0", "x", "4-2", "0-3"):
        with pytest.raises(ConfigError, match="--k"):
            k_values(bad)


def test_held_out_units_keep_the_first_broken_unit_visible():
    assert held_out_units(["t.py::b[1]", "t.py::a", "t.py::b[2]", "t.py::c"]) == ["t.py::b"]
    assert held_out_units(["t.py::a", "t.py::b", "t.py::c", "t.py::d"]) == ["t.py::b", "t.py::d"]
    assert held_out_units(["t.py::a[1]", "t.py::a[2]"]) == []  # one unit: nothing to hold out
    assert visible_count(1) == 1 and visible_count(2) == 1 and visible_count(4) == 2


@pytest.mark.parametrize("min_hidden", [1, 2])
def test_single_site_tasks_split_their_own_tests_and_are_counted_exactly(min_hidden):
    pool = Pool(SITES, REACH, min_hidden=min_hidden)
    p = FakePrepared(REACH)
    got = list(pool.combinations(1, seed=0))
    # brute force: every site whose split (its own held-out units hidden) leaves a visible
    # broken test and at least min_hidden broken hidden tests
    ok = []
    for s in SITES:
        split = split_tests(p, [s], 1, p.groups)
        if split and len(set(s.fail_to_pass) & set(split[1])) >= min_hidden:
            ok.append(s.sha256)
    assert pool.upper_bound(1) == (len(ok), False)
    assert sorted(c[0].sha256 for c in got) == sorted(ok)
    assert all(len(c) == 1 for c in got)
    if min_hidden == 1:
        assert ok  # the control: some site can make a task alone
        for c in got:
            vis, hid = split_tests(p, c, 1, p.groups)
            assert set(c[0].fail_to_pass) & set(vis) and set(c[0].fail_to_pass) & set(hid)
    # h's only site breaks one unit: it can never be alone (nothing to hold out)
    assert all(c[0].function != "pkg/m.py::h" for c in got)


# TA and TB inherit test_x from one mixin: one body, so both copies are hidden or visible together
REACH_SHARED = {
    "pkg/m.py::f": ["t.py::TA::test_x", "t.py::TA::test_y"],
    "pkg/m.py::g": ["t.py::TB::test_x", "t.py::t_g"],
    "pkg/m.py::h": ["t.py::TB::test_x"],
    "pkg/m.py::e": ["t.py::t_e[1]", "t.py::t_e[2]"],
}
SITES_SHARED = [
    vm("f", 0, ["t.py::TA::test_x", "t.py::TA::test_y"]),
    vm("g", 0, ["t.py::TB::test_x", "t.py::t_g"]),
    vm("h", 0, ["t.py::TB::test_x"]),  # breaks only TB's copy of the shared body
    vm("e", 0, ["t.py::t_e[1]", "t.py::t_e[2]"]),
]
SHARED = BodyGroups(
    of={"t.py::TA::test_x": "t.py::TA::test_x", "t.py::TB::test_x": "t.py::TA::test_x"}
)


def splits_a_group(groups: BodyGroups, visible: list[str], hidden: list[str]) -> bool:
    return bool({groups.key(t) for t in visible} & {groups.key(t) for t in hidden})


@pytest.mark.parametrize("k", [1, 2, 3])
def test_tests_sharing_a_body_are_hidden_or_visible_together(k):
    p = FakePrepared(REACH_SHARED, SHARED)
    pool = Pool(SITES_SHARED, REACH_SHARED, min_hidden=1, groups=SHARED)
    assert pool.upper_bound(k)[0] == (
        brute_force(pool, p, k)
        if k > 1
        else sum(split_tests(p, [s], 1, SHARED) is not None for s in SITES_SHARED)
    )
    got = list(pool.combinations(k, seed=0))
    assert got
    for combo in got:
        split = split_tests(p, combo, visible_count(k), SHARED)
        assert split is not None
        assert not splits_a_group(SHARED, *split)


def test_without_grouping_the_search_splits_a_shared_body():
    # the control: the same pool searched unit by unit yields a combination (h visible, f
    # hidden) whose cut hides TA's copy of test_x while TB's stays visible
    p = FakePrepared(REACH_SHARED)
    pool = Pool(SITES_SHARED, REACH_SHARED, min_hidden=1)
    split = [split_tests(p, c, 1, NO_GROUPS) for c in pool.combinations(2, seed=0)]
    assert any(s and splits_a_group(SHARED, *s) for s in split)
    grouped = Pool(SITES_SHARED, REACH_SHARED, min_hidden=1, groups=SHARED)
    assert grouped.upper_bound(2)[0] < pool.upper_bound(2)[0]


def test_a_group_with_a_test_that_never_passes_is_never_visible():
    pinned = BodyGroups(of=SHARED.of, pinned=frozenset({"t.py::TA::test_x"}))
    p = FakePrepared(REACH_SHARED, pinned)
    pool = Pool(SITES_SHARED, REACH_SHARED, min_hidden=1, groups=pinned)
    for k in (1, 2):
        for combo in pool.combinations(k, seed=0):
            vis, _ = split_tests(p, combo, visible_count(k), pinned)
            assert "t.py::TB::test_x" not in vis and "t.py::TA::test_x" not in vis
    # h breaks only the pinned group: it can never be a visible site
    assert all(c[0].function != "pkg/m.py::h" for c in pool.combinations(2, seed=0))


def _pool_of(n_functions: int, per_function: int) -> Pool:
    """Functions f0.. each reached by tests of their own and one shared test, every mutation
    breaking two of its function's tests: any choice of distinct functions splits."""
    reach = {
        f"f{i}": [f"t.py::test_{i}_{j}" for j in range(4)] + ["t.py::test_all"]
        for i in range(n_functions)
    }
    muts = [
        vm(f"f{i}", j, [f"t.py::test_{i}_0", f"t.py::test_{i}_1"])
        for i in range(n_functions)
        for j in range(per_function)
    ]
    return Pool(muts, reach, min_hidden=2)


def test_enough_sites_asks_for_room_beyond_the_tasks_asked():
    from verigap.repos.tasks import enough_sites

    assert enough_sites(_pool_of(14, 1), [2, 3, 4], 10)  # max(3k, n+k) = 14 functions
    assert not enough_sites(_pool_of(13, 1), [2, 3, 4], 10)  # one function short
    # a project whose candidates touch fewer functions: all of them, with tasks to spare
    assert enough_sites(_pool_of(8, 3), [2, 3, 4], 10, functions=8)
    assert not enough_sites(_pool_of(7, 3), [2, 3, 4], 10, functions=8)
    # ... but never on too few possible tasks, whatever the functions
    assert not enough_sites(_pool_of(4, 1), [2, 3, 4], 10, functions=4)


def test_site_checks_run_once_across_the_searches_for_each_k():
    """make-tasks runs one search per k asked; a site's own checks do not depend on the others,
    so each runs once in all (they are sandboxed runs: seconds each)."""
    from verigap.repos.tasks import SiteChecks

    pool = Pool(SITES, REACH, min_hidden=1)
    checks = SiteChecks(None, pool, {})
    calls: list[int] = []

    def run_checks(i: int) -> bool:
        calls.append(i)
        checks.route[i] = "rejected" if i == 4 else "comparison (pickle)"
        return i != 4

    checks._usable = run_checks
    got = [list(pool.combinations(k, seed=1, usable=checks.usable)) for k in (1, 2)]
    assert all(got)
    assert len(calls) == len(set(calls)) and 4 in calls
