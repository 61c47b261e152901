"""Which valid mutations can share a task, and in what order to try them.

A task puts ``n_vis = k // 2`` sites in front of the visible tests and ``k - n_vis`` behind the
hidden ones. Test units (a test function, parameters stripped) that reach a hidden site's
function are hidden whole, so a combination works exactly when every visible site still breaks
a test in some unit that no hidden site's function reaches, and every hidden site breaks at
least ``min_hidden`` tests. Both are set operations on per-site bit masks, so the search never
runs a suite to learn that a combination cannot split, and the number of combinations that can
(:meth:`Pool.upper_bound`) is counted exactly rather than estimated from a sample.

Sampling k functions at random and rejecting the combinations that do not split wastes most
draws when few hidden-capable sites are compatible; here the hidden group is chosen first and
only the visible sites that fit it are combined with it (:meth:`Pool.combinations`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from verigap.repos.validate import ValidMutation

#: hidden groups examined when counting the upper bound; past it the count is a lower bound on
#: the true number of combinations and is reported as capped
MAX_GROUPS = 200_000


def unit_of(test_id: str) -> str:
    """The test function a test id belongs to: parameters stripped (as ``tasks.unit_of``)."""
    return test_id.split("[", 1)[0]


def visible_count(k: int) -> int:
    """Visible sites of a task of ``k``: half, and the one site of a single-site task (whose
    own broken tests are split: :func:`held_out_units`)."""
    return k // 2 if k > 1 else 1


@dataclass(frozen=True)
class BodyGroups:
    """Test units that run one shared body (a method that several test classes inherit from a
    mixin or base class): a hidden copy is cut where the body is defined, which would also cut
    a visible copy, so every copy is hidden or visible together. ``of`` maps each member of a
    group to the group's key (its first unit); ``pinned`` holds the keys of groups with a
    member that never passes, so never visible (not-passing tests are cut from every
    workspace)."""

    of: dict[str, str] = field(default_factory=dict)
    pinned: frozenset[str] = frozenset()

    def key(self, test_id: str) -> str:
        """The unit a test id belongs to, or its shared-body group."""
        u = unit_of(test_id)
        return self.of.get(u, u)


NO_GROUPS = BodyGroups()


def held_out_units(fail_to_pass: Sequence[str], groups: BodyGroups = NO_GROUPS) -> list[str]:
    """The units (or shared-body groups) of a single-site task that are hidden: every second
    one its mutation breaks, in sorted order (so the first stays visible and the agent sees
    the bug fail a test), kept whole with every test of those units. Empty when it breaks
    tests in one unit only."""
    return sorted({groups.key(t) for t in fail_to_pass})[1::2]


def elementary(counts: Sequence[int], m: int) -> int:
    """The m-th elementary symmetric polynomial of ``counts``: over every choice of ``m``
    distinct entries, the sum of their products (ways to pick m functions, one site each)."""
    e = [1] + [0] * m
    for c in counts:
        for j in range(m, 0, -1):
            e[j] += e[j - 1] * c
    return e[m]


@dataclass
class Pool:
    """Valid mutations indexed for combining: one bit per test unit, a mask per function of the
    units that reach it, and a mask per site of the units it breaks."""

    sites: list[ValidMutation]
    reach: dict[str, list[str]]
    min_hidden: int = 2
    groups: BodyGroups = NO_GROUPS
    units: dict[str, int] = field(init=False)
    reach_mask: dict[str, int] = field(init=False)
    fail_mask: list[int] = field(init=False)
    pinned_mask: int = field(init=False)
    by_fn: dict[str, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.units = {}

        def mask(tests) -> int:
            m = 0
            for t in tests:
                m |= 1 << self.units.setdefault(self.groups.key(t), len(self.units))
            return m

        self.by_fn = {}
        for i, s in enumerate(self.sites):
            self.by_fn.setdefault(s.function, []).append(i)
        self.reach_mask = {f: mask(self.reach.get(f, ())) for f in sorted(self.by_fn)}
        self.fail_mask = [mask(s.fail_to_pass) for s in self.sites]
        # a pinned group is never visible: as if a hidden site reached it in every task
        self.pinned_mask = mask(self.groups.pinned)

    def hidden_capable(self, i: int) -> bool:
        """A site can be hidden when it breaks enough tests (all of them reach it, so all are
        hidden with it)."""
        return len(self.sites[i].fail_to_pass) >= self.min_hidden

    def hidden_functions(self) -> list[str]:
        return [f for f, ix in sorted(self.by_fn.items()) if any(map(self.hidden_capable, ix))]

    def single_capable(self, i: int) -> bool:
        """A site can make a task alone when the units held out of its broken tests
        (:func:`held_out_units`) hold at least ``min_hidden`` of them."""
        ftp = self.sites[i].fail_to_pass
        held = set(held_out_units(ftp, self.groups)) | self.groups.pinned
        if all(self.groups.key(t) in held for t in ftp):
            return False  # no broken test stays visible
        return sum(1 for t in ftp if self.groups.key(t) in held) >= self.min_hidden

    def visible_fits(self, i: int, bad: int) -> bool:
        """Site ``i`` still breaks a visible test once the units in ``bad`` are hidden."""
        return bool(self.fail_mask[i] & ~bad)

    def upper_bound(self, k: int) -> tuple[int, bool]:
        """(how many distinct tasks of ``k`` sites the pool could make, whether the count was
        capped at :data:`MAX_GROUPS` hidden groups): every choice of hidden sites in distinct
        functions and visible sites in other functions that splits; for ``k=1``, every site
        that can make a task alone (:meth:`single_capable`)."""
        if k == 1:
            return sum(map(self.single_capable, range(len(self.sites)))), False
        n_vis = k // 2
        hid = self.hidden_functions()
        total, capped = 0, False
        n_hidden = {f: sum(map(self.hidden_capable, self.by_fn[f])) for f in hid}
        for g, group in enumerate(itertools.combinations(hid, k - n_vis)):
            if g >= MAX_GROUPS:
                capped = True
                break
            bad = self.pinned_mask
            weight = 1
            for f in group:
                bad |= self.reach_mask[f]
                weight *= n_hidden[f]
            counts = [
                sum(1 for i in ix if self.visible_fits(i, bad))
                for f, ix in self.by_fn.items()
                if f not in group
            ]
            total += weight * elementary([c for c in counts if c], n_vis)
        return total, capped

    def combinations(
        self, k: int, *, seed: int, usable: Callable[[int], bool] = lambda i: True
    ) -> Iterator[list[ValidMutation]]:
        """Combinations that split, hidden sites last, the least-used sites first so the tasks
        spread over the pool; each set of sites once. ``usable(i)`` is asked lazily, once per
        site, before a site is put in a combination (the per-site checks: equivalence input,
        discrimination), so a site that cannot serve costs its check once and never a build.
        ``k=1``: each site that can make a task alone, once, one function after another."""
        n_vis = k // 2
        rng = random.Random(seed)
        verdict: dict[int, bool] = {}

        def ok(i: int) -> bool:
            if i not in verdict:
                verdict[i] = bool(usable(i))
            return verdict[i]

        if k == 1:
            yield from self._singles(rng, ok)
            return

        used: dict[int, int] = {}
        seen: set[tuple[frozenset[int], frozenset[int]]] = set()
        groups = (
            list(itertools.combinations(self.hidden_functions(), k - n_vis))
            if len(self.by_fn) >= k
            else []
        )
        rng.shuffle(groups)
        # rounds: in each, a function serves in at most one hidden group, so the first tasks
        # spread over the pool; a group stays for later rounds while it yields new sets
        pending = groups
        while pending:
            served: set[str] = set()
            later: list[tuple[str, ...]] = []
            made = False
            for group in pending:
                if served & set(group):
                    later.append(group)
                    continue
                combo = self._fill(group, n_vis, ok, used, rng)
                if combo is None:
                    continue  # no usable site for it now: it never will have (checks are fixed)
                vis, hid = combo
                key = (frozenset(vis), frozenset(hid))
                if key in seen:
                    continue  # its least-used sites repeat a task: nothing new from it
                seen.add(key)
                for i in vis + hid:
                    used[i] = used.get(i, 0) + 1
                served |= set(group)
                made = True
                later.append(group)
                yield [self.sites[i] for i in vis + hid]
            if not made:
                break
            pending = later

    def _singles(
        self, rng: random.Random, ok: Callable[[int], bool]
    ) -> Iterator[list[ValidMutation]]:
        """Single-site tasks: rounds over the functions in a seeded order, one site of each
        per round, so the first tasks spread over the pool."""
        queues = {
            f: [i for i in rng.sample(ix, len(ix)) if self.single_capable(i)]
            for f, ix in sorted(self.by_fn.items())
        }
        order = sorted(queues)
        rng.shuffle(order)
        while any(queues.values()):
            for f in order:
                while queues[f]:
                    i = queues[f].pop(0)
                    if ok(i):
                        yield [self.sites[i]]
                        break

    def _fill(
        self,
        group: tuple[str, ...],
        n_vis: int,
        ok: Callable[[int], bool],
        used: dict[int, int],
        rng: random.Random,
    ) -> tuple[list[int], list[int]] | None:
        """Least-used usable sites for a hidden ``group`` and ``n_vis`` visible functions."""

        def pick(ix: Sequence[int], cond: Callable[[int], bool]) -> int | None:
            order = sorted(ix, key=lambda i: (used.get(i, 0), rng.random()))
            for i in order:
                if cond(i) and ok(i):
                    return i
            return None

        hid: list[int] = []
        bad = self.pinned_mask
        for f in group:
            i = pick(self.by_fn[f], self.hidden_capable)
            if i is None:
                return None
            hid.append(i)
            bad |= self.reach_mask[f]
        others = [f for f in self.by_fn if f not in group]
        rng.shuffle(others)
        # least-used functions first: a function is as used as its least-used site
        others.sort(key=lambda f: min(used.get(i, 0) for i in self.by_fn[f]))
        vis: list[int] = []
        for f in others:
            if len(vis) == n_vis:
                break
            i = pick(self.by_fn[f], lambda j: self.visible_fits(j, bad))
            if i is not None:
                vis.append(i)
        return (vis, hid) if len(vis) == n_vis else None


def k_values(spec: str | int) -> list[int]:
    """``4`` -> [4]; ``"1-4"`` -> [1, 2, 3, 4] (tasks cycle through them, for a spread of
    difficulty)."""
    text = str(spec).strip()
    try:
        lo, _, hi = text.partition("-")
        ks = list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        ks = []
    if not ks or ks[0] < 1:
        from verigap.errors import ConfigError

        raise ConfigError(
            f"--k {spec!r}: give a number of sites per task of at least 1 (half visible, "
            "half hidden; a single site has some of its own tests hidden), or a range such "
            "as 1-4"
        )
    return ks
