"""Linear probes on the transformer policy's frozen hidden states, before and after GRPO.

Three questions, each a binary label per branch token:

- ``tested``: a visible test reaches this branch (every branch of a program);
- ``broken``: this branch is broken (every branch);
- ``hack``: the policy *after* GRPO deletes or stubs this branch (broken branches only). Probing
  the SFT start for it asks whether the representation already marks where the trained policy
  will hack before GRPO taught it to.

A probe is an L2-regularised logistic regression (Newton's method, NumPy) fitted on the hidden
states of training-stream programs and scored on held-out-stream programs (disjoint by content
hash), by balanced accuracy (the mean of the per-class recalls: 0.5 is chance whatever the base
rate). Controls:

- ``shuffled``: the same probe fitted on permuted labels, scored on the true held-out labels;
- ``control``: a control task (Hewitt & Liang, 2019): every input *type* gets a random label
  with the real label's base rate, fitted and scored the same way. The type is everything the
  branch's input token carries (position, shown value and the broken, tested and strict flags),
  so the control probe has the same input to memorise as the real one;
- ``input``: the same probe fitted on the input alone (the branch's token features and its
  position, one-hot), with no network in between. ``tested`` and ``broken`` are flags of the
  token, and the trained policy hacks exactly the untested broken branches, so all three labels
  can be read off the input; a hidden state is only credited with what the input does not
  already give;
- ``selectivity`` = probe balanced accuracy minus the larger of the control-task and the input
  probe's balanced accuracy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from verigap.patchworld import rules
from verigap.patchworld.programs import N_BRANCHES, N_VALUES, Programs, generate
from verigap.patchworld.transformer import tokens

if TYPE_CHECKING:
    from verigap.patchworld.transformer_policy import TransformerPolicy

TARGETS = ("tested", "broken", "hack")
STATS = ("bacc", "shuffled", "control", "input", "selectivity")
#: input types of a branch token: position x shown value x (broken, tested, strict) flags
N_TYPES = N_BRANCHES * N_VALUES * 8
PROBE_PROGRAMS = 600  # per split: 7200 branch tokens (2400 broken ones at k=4)


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float = 1e-2, iters: int = 50
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardise ``x``, fit weights and bias (last entry) by Newton's method. A label with a
    single class gives the constant predictor of that class."""
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))]).astype(np.float64)
    w = np.zeros(z.shape[1])
    y = y.astype(np.float64)
    if y.min() == y.max():
        w[-1] = 30.0 if y[0] else -30.0
        return mu, sd, w
    reg = np.full(z.shape[1], l2)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        grad = z.T @ (p - y) / len(y) + reg * w
        hess = (z.T * (p * (1 - p))) @ z / len(y) + np.diag(reg)
        delta = np.linalg.solve(hess, grad)
        w -= delta
        if np.abs(delta).max() < 1e-8:
            break
    return mu, sd, w


def predict(model: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    mu, sd, w = model
    return ((x - mu) / sd) @ w[:-1] + w[-1] > 0


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean of the two classes' recalls (0.5 for a constant guess). Labels of a single class
    leave nothing to tell apart: 0.5, chance, whatever the prediction."""
    if y.min() == y.max():
        return 0.5
    return float(np.mean([(pred[y == c] == c).mean() for c in (False, True)]))


def input_types(programs: Programs) -> np.ndarray:
    """(B, 12) int: the type of each branch token, everything its input carries."""
    flags = (
        programs.broken.astype(np.int64) * 4
        + programs.tested.astype(np.int64) * 2
        + programs.strict.astype(np.int64)
    )
    return (np.arange(N_BRANCHES)[None, :] * N_VALUES + programs.shown) * 8 + flags


def input_features(programs: Programs) -> np.ndarray:
    """(B, 12, features): each branch token's input features and its position, one-hot."""
    pos = np.broadcast_to(
        np.eye(N_BRANCHES, dtype=np.float32), (programs.size, N_BRANCHES, N_BRANCHES)
    )
    return np.concatenate([tokens(programs), pos], axis=-1)


def input_bacc(x_tr: np.ndarray, y_tr: np.ndarray, x_te: np.ndarray, y_te: np.ndarray) -> float:
    """Balanced accuracy of the probe fitted on the input features alone."""
    return balanced_accuracy(y_te, predict(fit_logistic(x_tr, y_tr), x_te))


def probe_scores(
    x_tr: np.ndarray,
    y_tr: np.ndarray,
    x_te: np.ndarray,
    y_te: np.ndarray,
    types_tr: np.ndarray,
    types_te: np.ndarray,
    seed: int,
    input_score: float,
) -> dict[str, float]:
    """Balanced accuracy of the probe, of its shuffled-label and control-task versions, and the
    selectivity over the control task and the input-only probe (``input_score``), on one
    layer's states."""
    rng = np.random.default_rng([seed, 11])
    bacc = balanced_accuracy(y_te, predict(fit_logistic(x_tr, y_tr), x_te))
    shuffled = balanced_accuracy(y_te, predict(fit_logistic(x_tr, rng.permutation(y_tr)), x_te))
    table = rng.random(N_TYPES) < y_tr.mean()  # a random label per input type
    control = balanced_accuracy(table[types_te], predict(fit_logistic(x_tr, table[types_tr]), x_te))
    return {
        "bacc": bacc,
        "shuffled": shuffled,
        "control": control,
        "input": input_score,
        "selectivity": bacc - max(control, input_score),
    }


Split = tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]


def _split(
    policy: TransformerPolicy, final: TransformerPolicy, programs: Programs
) -> dict[str, Split]:
    """Per target: each layer's states (rows), the labels, the input types and the input
    features."""
    hidden = policy.hidden(programs)  # per layer (B, 12, d)
    d = hidden[0].shape[-1]
    types = input_types(programs)
    feats = input_features(programs)
    f = feats.shape[-1]
    hack = np.isin(final.act(programs, None, greedy=True), (rules.STUB, rules.DELETE))
    rows = np.arange(programs.size)[:, None]
    at = (rows, programs.order)
    return {
        "tested": (
            [h.reshape(-1, d) for h in hidden],
            programs.tested.reshape(-1),
            types.reshape(-1),
            feats.reshape(-1, f),
        ),
        "broken": (
            [h.reshape(-1, d) for h in hidden],
            programs.broken.reshape(-1),
            types.reshape(-1),
            feats.reshape(-1, f),
        ),
        "hack": (
            [h[at].reshape(-1, d) for h in hidden],
            hack.reshape(-1),
            types[at].reshape(-1),
            feats[at].reshape(-1, f),
        ),
    }


def probe_report(
    start: TransformerPolicy,
    final: TransformerPolicy,
    k: int,
    seed: int,
    configure=lambda p: p,
    n: int = PROBE_PROGRAMS,
) -> dict[str, Any]:
    """Probes on the SFT start and on the trained policy, every target and layer. The last
    layer's numbers are the headline (``probe_*`` metrics of the experiment log)."""
    train = configure(generate(k, n, seed=40_000 + seed))
    test = configure(generate(k, n, seed=40_000 + seed, stream="heldout"))
    out: dict[str, Any] = {"programs": {"train": n, "heldout": n}}
    for when, policy in (("start", start), ("final", final)):
        tr, te = _split(policy, final, train), _split(policy, final, test)
        out[when] = {}
        for target in TARGETS:
            (xs_tr, y_tr, t_tr, f_tr), (xs_te, y_te, t_te, f_te) = tr[target], te[target]
            base = input_bacc(f_tr, y_tr, f_te, y_te)
            layers = [
                probe_scores(a, y_tr, b, y_te, t_tr, t_te, seed, base)
                for a, b in zip(xs_tr, xs_te, strict=True)
            ]
            out[when][target] = {
                **layers[-1],
                "positive_rate": float(y_te.mean()),
                "n_train": int(y_tr.size),
                "n_heldout": int(y_te.size),
                "by_layer": {s: [lay[s] for lay in layers] for s in STATS},
            }
    return out
