"""The Patch World policy: a small MLP in NumPy with hand-written gradients, and Adam.

Per step the policy sees the branch it must act on through its neighbourhood (the intact
branches up to four places either side, as scaled values and one-hots), its position, whether a
test reaches it, whether it is type-strict and how many branches are broken. It outputs a
softmax over the 34 actions: write value 0..31, stub, delete.

The maths is factored into pure functions (log-softmax, categorical KL and their gradients with
respect to the logits) that tests check against hand-computed values and finite differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verigap.patchworld import rules
from verigap.patchworld.programs import N_BRANCHES, N_VALUES, Programs

OFFSETS = (-4, -3, -2, -1, 1, 2, 3, 4)
N_FEATURES = len(OFFSETS) * (N_VALUES + 2) + N_BRANCHES + 3


def features(programs: Programs, step: int) -> np.ndarray:
    """(B, N_FEATURES) float32 observation for acting on the ``step``-th broken branch."""
    b = programs.size
    rows = np.arange(b)
    target = programs.order[:, step]
    j = target[:, None] + np.asarray(OFFSETS)[None, :]  # (B, 8) neighbour positions
    jc = np.clip(j, 0, N_BRANCHES - 1)
    intact = (j >= 0) & (j < N_BRANCHES) & ~programs.broken[rows[:, None], jc]
    val = programs.shown[rows[:, None], jc]
    block = np.zeros((b, len(OFFSETS), N_VALUES + 2), dtype=np.float32)
    block[:, :, 0] = intact
    block[:, :, 1] = intact * val / (N_VALUES - 1)
    r, o = np.nonzero(intact)
    block[r, o, 2 + val[r, o]] = 1.0
    tail = np.zeros((b, N_BRANCHES + 3), dtype=np.float32)
    tail[rows, target] = 1.0
    tail[:, N_BRANCHES] = programs.tested[rows, target]
    tail[:, N_BRANCHES + 1] = programs.strict[rows, target]
    tail[:, N_BRANCHES + 2] = programs.broken.sum(1) / N_BRANCHES
    return np.concatenate([block.reshape(b, -1), tail], axis=1)


def all_features(programs: Programs, out: np.ndarray | None = None) -> np.ndarray:
    """(B, k, N_FEATURES): the observation at every acting step of every program.

    The same values as stacking ``features(programs, t)`` over t (a test checks it), built in
    one pass over all steps: per-step calls cost more in NumPy overhead than in arithmetic.
    ``out``: a zero-filled float32 array of that shape to write into (returned), so a caller
    that stacks observations builds them in place instead of copying them there.
    """
    b, k = programs.size, programs.k
    if out is None:
        out = np.zeros((b, k, N_FEATURES), dtype=np.float32)
    rows = np.arange(b)[:, None]
    target = programs.order[:, :k]  # (B, k)
    j = target[:, :, None] + np.asarray(OFFSETS)  # (B, k, 8) neighbour positions
    jc = np.clip(j, 0, N_BRANCHES - 1)
    intact = (j >= 0) & (j < N_BRANCHES) & ~programs.broken[rows[:, :, None], jc]
    val = programs.shown[rows[:, :, None], jc]
    n_block = len(OFFSETS) * (N_VALUES + 2)
    block = out[..., :n_block].reshape(b, k, len(OFFSETS), N_VALUES + 2)  # views of ``out``
    tail = out[..., n_block:]
    block[..., 0] = intact
    block[..., 1] = intact * val / (N_VALUES - 1)
    r, s, o = np.nonzero(intact)
    block[r, s, o, 2 + val[r, s, o]] = 1.0
    tail[rows, np.arange(k), target] = 1.0
    tail[..., N_BRANCHES] = programs.tested[rows, target]
    tail[..., N_BRANCHES + 1] = programs.strict[rows, target]
    tail[..., N_BRANCHES + 2] = (programs.broken.sum(1) / N_BRANCHES)[:, None]
    return out


# ---- pure maths --------------------------------------------------------------------------


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def categorical_kl(logp: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """KL(p || q) per row, exactly, from log-probabilities (no sampling estimator needed:
    the action space has 34 entries)."""
    return (np.exp(logp) * (logp - logq)).sum(axis=-1)


def grad_kl_wrt_logits(logp: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """d KL(softmax(z) || q) / dz = p * (log p - log q - KL)."""
    p = np.exp(logp)
    kl = (p * (logp - logq)).sum(axis=-1, keepdims=True)
    return p * (logp - logq - kl)


def kl_with_grad(
    logp: np.ndarray, logq: np.ndarray, p: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``categorical_kl`` and ``grad_kl_wrt_logits`` at once, with ``p = exp(logp)`` given:
    the same numbers, the exponential and the difference computed once."""
    d = logp - logq
    kl = (p * d).sum(axis=-1, keepdims=True)
    return kl[..., 0], p * (d - kl)


def grad_nll_wrt_logits(logp: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """d (-log p[a]) / dz = p - onehot(a)."""
    g = np.exp(logp)
    g[np.arange(actions.size), actions] -= 1.0
    return g


# ---- the network ----------------------------------------------------------------------------


@dataclass
class MLP:
    """features -> tanh hidden layer -> logits over the 34 actions."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    @staticmethod
    def init(rng: np.random.Generator, hidden: int = 128, dtype=np.float32) -> MLP:
        """Float32 by default: the features are float32 and mixing dtypes costs copies."""
        return MLP(
            w1=(rng.standard_normal((N_FEATURES, hidden)) / np.sqrt(N_FEATURES)).astype(dtype),
            b1=np.zeros(hidden, dtype),
            w2=(rng.standard_normal((hidden, rules.N_ACTIONS)) * 0.01).astype(dtype),
            b2=np.zeros(rules.N_ACTIONS, dtype),
        )

    def astype(self, dtype) -> MLP:
        return MLP(*[p.astype(dtype) for p in self.params()])

    def params(self) -> list[np.ndarray]:
        return [self.w1, self.b1, self.w2, self.b2]

    def copy(self) -> MLP:
        return MLP(*[p.copy() for p in self.params()])

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits and the hidden activations (kept for the backward pass)."""
        h = np.tanh(x @ self.w1 + self.b1)
        return h @ self.w2 + self.b2, h

    def log_probs(self, x: np.ndarray) -> np.ndarray:
        return log_softmax(self.forward(x)[0])

    def backward(self, x: np.ndarray, h: np.ndarray, dz: np.ndarray) -> list[np.ndarray]:
        """Gradients of sum(dz * logits) with respect to every parameter."""
        dh = (dz @ self.w2.T) * (1.0 - h * h)
        return [x.T @ dh, dh.sum(0), h.T @ dz, dz.sum(0)]

    def to_dict(self) -> dict[str, list]:
        return {k: v.tolist() for k, v in zip(("w1", "b1", "w2", "b2"), self.params(), strict=True)}

    @staticmethod
    def from_dict(d: dict) -> MLP:
        return MLP(*[np.asarray(d[k], dtype=np.float32) for k in ("w1", "b1", "w2", "b2")])


class Adam:
    """Adam over a list of arrays, updated in place.

    The update is ``p -= (step * m / (sqrt(v) + eps)).astype(p.dtype)`` with ``step`` and
    ``eps`` float64 scalars (NumPy's, not weak Python floats), so the division runs in float64.
    Its temporaries live in buffers made once: a fresh float64 temporary of a weight matrix's
    size is mapped and faulted in at every step. Every operation and dtype is the
    expression's, so the numbers are the same bits (``test_speed_equivalence.py`` checks it).
    """

    def __init__(
        self, params: list[np.ndarray], lr: float, betas=(0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        wide = [np.result_type(p.dtype, np.float64) for p in params]
        self._buf = [
            (np.empty_like(p), np.empty(p.shape, w), np.empty(p.shape, w))
            for p, w in zip(params, wide, strict=True)
        ]
        self.t = 0

    def step(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        b1, b2 = self.betas
        step = self.lr * np.sqrt(1 - b2**self.t) / (1 - b1**self.t)  # bias corrections folded in
        eps = self.eps * np.sqrt(1 - b2**self.t)
        for p, g, m, v, (tmp, num, den) in zip(
            self.params, grads, self.m, self.v, self._buf, strict=True
        ):
            g = g.astype(p.dtype, copy=False)
            m *= b1
            m += np.multiply(g, 1 - b1, out=tmp)
            v *= b2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - b2
            v += tmp
            np.multiply(m, step, out=num)  # in float64
            np.add(np.sqrt(v, out=tmp), eps, out=den)  # the root in p's dtype, the sum in float64
            np.divide(num, den, out=tmp)  # in float64, rounded to p's dtype as astype rounds
            p -= tmp


def sample(logp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row from log-probabilities (inverse-CDF on one uniform per row)."""
    return _draw(np.cumsum(np.exp(logp), axis=-1), rng)


def sample_group(logp: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """(rows, n) actions, the same as ``n`` calls of ``sample`` in a row: one CDF for all, and
    ``rng.random((n, rows))`` yields the same numbers as ``n`` draws of ``rows``."""
    return _draw(np.cumsum(np.exp(logp), axis=-1), rng, n).T


def _draw(cdf: np.ndarray, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
    shape = (cdf.shape[0],) if n is None else (n, cdf.shape[0])
    u = rng.random(shape)[..., None] * cdf[:, -1:]
    return np.minimum(count_below(cdf, u), cdf.shape[-1] - 1)


def count_below(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``(cdf < u).sum(-1)`` as int64, for ``u`` of float64 (uniforms times a total).

    With a float32 ``cdf`` (the MLP's) the comparison runs in float32 against ``u`` rounded up
    to float32, which gives the same answer: a float32 ``c`` is below ``u`` exactly when it is
    below the least float32 not below ``u``. Comparing float32 with float64 converted every
    entry, and counting in bytes is cheaper than in int64 (a test checks equality, ties too).
    """
    if cdf.dtype != np.float32 or cdf.shape[-1] > 255:
        return (cdf < u).sum(axis=-1)
    up = u.astype(np.float32)
    low = up < u
    up[low] = np.nextafter(up[low], np.float32(np.inf))
    return (cdf < up).view(np.uint8).sum(axis=-1, dtype=np.uint8).astype(np.int64)


def act(
    model: MLP,
    programs: Programs,
    rng: np.random.Generator | None,
    greedy: bool = False,
    feats: list[np.ndarray] | None = None,
) -> np.ndarray:
    """(B, k) actions for whole episodes; greedy takes the most likely action. ``feats``:
    ``[features(programs, t) for t in range(k)]`` when the caller keeps them (a fixed set
    evaluated again and again)."""
    out = np.zeros(programs.order.shape, dtype=np.int64)
    for t in range(programs.k):
        logp = model.log_probs(features(programs, t) if feats is None else feats[t])
        out[:, t] = logp.argmax(-1) if greedy else sample(logp, rng)
    return out
