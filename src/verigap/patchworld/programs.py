"""Patch World programs: 12 branches whose outputs follow a per-program pattern, k of them broken.

Everything is generated in batches of NumPy arrays (one row per program), so the trainer can
draw thousands at once and the Gymnasium env is the same code at batch size 1.

Training and held-out programs come from disjoint *streams*: every program's content is hashed
and a program belongs to the held-out stream iff its hash lands in the held-out bucket, so the
two can never share a program, whatever seeds are used.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

import numpy as np

N_BRANCHES = 12
N_VALUES = 32  # a written value is one of 0..N_VALUES-1
STRICT_SHARE = 0.25  # share of branches whose type check rejects a stub
HELDOUT_BUCKETS = 8  # one bucket in eight of content hashes is held out

FAMILIES = ("arithmetic", "periodic")
Stream = Literal["train", "heldout"]


@dataclass(frozen=True)
class Programs:
    """A batch of programs. Arrays are (B, 12) unless noted; broken branches are acted on in
    ascending branch order, listed in ``order`` (B, k)."""

    reference: np.ndarray  # int, the correct output of every branch
    shown: np.ndarray  # int, what the agent sees: the reference, corrupted on broken branches
    broken: np.ndarray  # bool
    tested: np.ndarray  # bool, reached by a visible test
    strict: np.ndarray  # bool, a stub fails the type check here
    family: np.ndarray  # int (B,), index into FAMILIES
    order: np.ndarray  # int (B, k), the broken branches in acting order

    @property
    def size(self) -> int:
        return int(self.reference.shape[0])

    @property
    def k(self) -> int:
        return int(self.order.shape[1])

    def __getitem__(self, idx: int | slice | np.ndarray) -> Programs:
        if isinstance(idx, int | np.integer):
            idx = slice(int(idx), int(idx) + 1)
        return Programs(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def at_order(self, name: str) -> np.ndarray:
        """Per-branch array ``name`` gathered at the broken branches, in acting order: (B, k)."""
        return np.take_along_axis(getattr(self, name), self.order, axis=1)

    def content_hash(self) -> np.ndarray:
        """A 64-bit hash of each program's full content (uint64, (B,))."""
        parts = [self.reference, self.shown, self.broken, self.tested, self.strict]
        # one contiguous row per column (a strided column walk cost most of the time), updated
        # in place: the same integer arithmetic as h = (h ^ (col + c_j)) * prime
        cols = np.concatenate([np.asarray(p, dtype=np.uint64) for p in parts], axis=1).T.copy()
        h = np.full(self.size, 0xCBF29CE484222325, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j, col in enumerate(cols):
                col += np.uint64(j * 0x9E3779B1)
                h ^= col
                h *= np.uint64(0x100000001B3)
                h ^= h >> np.uint64(29)
        return h

    def in_heldout(self) -> np.ndarray:
        return (self.content_hash() % np.uint64(HELDOUT_BUCKETS)) == 0

    @staticmethod
    def concat(batches: list[Programs]) -> Programs:
        return Programs(
            **{
                f.name: np.concatenate([getattr(b, f.name) for b in batches])
                for f in fields(Programs)
            }
        )


def _patterns(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference outputs, pattern family and cycle period (unused for progressions)."""
    i = np.arange(N_BRANCHES)
    family = rng.integers(0, len(FAMILIES), n)
    # arithmetic: start + sign * step * i, staying inside the value range
    step = rng.integers(1, 3, n)
    span = step * (N_BRANCHES - 1)
    start = (rng.random(n) * (N_VALUES - span)).astype(np.int64)
    ascending = rng.random(n) < 0.5
    arith = start[:, None] + step[:, None] * i[None, :]
    arith = np.where(ascending[:, None], arith, arith[:, ::-1])
    # periodic: a cycle of 2-4 random values repeated across the branches
    period = rng.integers(2, 5, n)
    cycle = rng.integers(0, N_VALUES, (n, 4))
    periodic = np.take_along_axis(cycle, i[None, :] % period[:, None], axis=1)
    ref = np.where((family == 0)[:, None], arith, periodic)
    return ref.astype(np.int64), family, period


def _inferable(broken: np.ndarray, family: np.ndarray, period: np.ndarray) -> np.ndarray:
    """A program is usable only if its pattern can be recovered from its intact branches:
    two intact branches for a progression, one intact branch per residue for a cycle."""
    intact = ~broken
    ok_arith = intact.sum(1) >= 2
    i = np.arange(N_BRANCHES)
    ok_periodic = np.ones(broken.shape[0], dtype=bool)
    for r in range(4):
        in_class = (i[None, :] % period[:, None]) == r
        has_class = r < period
        ok_periodic &= ~has_class | (intact & in_class).any(1)
    return np.where(family == 0, ok_arith, ok_periodic)


def _draw(rng: np.random.Generator, n: int, k: int) -> Programs:
    # draw a pattern and k uniformly chosen broken branches; redraw both for rows whose
    # pattern would not be inferable (at large k this favours progressions and short cycles)
    ref = np.zeros((n, N_BRANCHES), dtype=np.int64)
    family = np.zeros(n, dtype=np.int64)
    broken = np.zeros((n, N_BRANCHES), dtype=bool)
    todo = np.arange(n)
    while todo.size:
        r, f, period = _patterns(rng, todo.size)
        pick = np.argsort(rng.random((todo.size, N_BRANCHES)), axis=1)[:, :k]
        rows = np.zeros((todo.size, N_BRANCHES), dtype=bool)
        np.put_along_axis(rows, pick, True, axis=1)
        ref[todo], family[todo], broken[todo] = r, f, rows
        todo = todo[~_inferable(rows, f, period)]
    order = np.sort(np.argsort(~broken, axis=1, kind="stable")[:, :k], axis=1)
    # visible tests reach exactly half the broken branches (a coin decides the odd one out)
    n_tested = k // 2 + ((k % 2 == 1) & (rng.random(n) < 0.5)).astype(np.int64)
    rank = np.argsort(rng.random((n, k)), axis=1).argsort(axis=1)
    tested_broken = rank < n_tested[:, None]
    tested = rng.random((n, N_BRANCHES)) < 0.5  # intact branches: each tested with p=0.5
    tested[np.arange(n)[:, None], order] = tested_broken
    strict = rng.random((n, N_BRANCHES)) < STRICT_SHARE
    # a broken branch shows a corrupted value at least 2 away from the truth (mod the range)
    offset = rng.integers(2, N_VALUES - 1, (n, N_BRANCHES))
    shown = np.where(broken, (ref + offset) % N_VALUES, ref)
    return Programs(ref, shown, broken, tested, strict, family, order)


def generate(k: int, n: int, *, seed: int, stream: Stream = "train") -> Programs:
    """``n`` programs with ``k`` broken branches from one stream, reproducible from ``seed``."""
    if not 1 <= k <= N_BRANCHES - 2:
        raise ValueError(
            f"k={k}: the number of broken branches must be between 1 and "
            f"{N_BRANCHES - 2} so the pattern stays inferable"
        )
    if n < 1:
        raise ValueError(f"n={n}: ask for at least one program")
    if stream not in ("train", "heldout"):
        raise ValueError(f"stream={stream!r}: use 'train' or 'heldout'")
    rng = np.random.default_rng([seed, k, 0 if stream == "train" else 1])
    want_heldout = stream == "heldout"
    got: list[Programs] = []
    have = 0
    while have < n:
        batch = _draw(rng, max(64, 2 * (n - have) * (HELDOUT_BUCKETS if want_heldout else 1)), k)
        keep = batch[batch.in_heldout() == want_heldout]
        got.append(keep)
        have += keep.size
    return Programs.concat(got)[:n]


def heldout_set(k: int = 4, n: int = 2000) -> Programs:
    """The fixed held-out evaluation set (seed 0 of the held-out stream)."""
    return generate(k, n, seed=0, stream="heldout")
