"""Verdicts computed from the criteria: a statistic, its bootstrap interval over seeds, a call.

A prediction says ``statistic COMPARE value``. With the percentile bootstrap interval
``[lo, hi]`` of the statistic at the criterion's confidence:

- **supported** when the whole interval satisfies the comparison,
- **refuted** when the whole interval satisfies its negation,
- **inconclusive** when the interval straddles the value, when a setting has fewer seeds than
  ``min_seeds``, or when the statistic is undefined (e.g. a zero denominator).

The bootstrap is deterministic: its generator is seeded from the prediction id.
"""

from __future__ import annotations

import hashlib
import operator
from typing import Any

import numpy as np

from verigap.experiments.registry import (
    Contrast,
    Correlation,
    Position,
    Prediction,
    Registry,
    Slope,
    Threshold,
)

B = 2000
SUPPORTED, REFUTED, INCONCLUSIVE = "supported", "refuted", "inconclusive"
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}

#: values[setting][metric] -> one number per seed, in seed order
Values = dict[str, dict[str, list[float]]]


def _rng(pid: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(pid.encode()).hexdigest()[:12], 16))


def _resample_means(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """B bootstrap means of the seed values ``v``; the first entry is the plain mean."""
    idx = rng.integers(0, v.size, (B, v.size))
    return np.concatenate([[v.mean()], v[idx].mean(1)])


def _stat_draws(c: Any, values: Values, rng: np.random.Generator) -> np.ndarray:
    """The statistic on the data (entry 0) and on B bootstrap resamples (entries 1..B)."""
    def arr(setting: str, metric: str | None = None) -> np.ndarray:
        return np.asarray(values[setting][metric or c.metric], dtype=float)

    if isinstance(c, Threshold):
        return _resample_means(arr(c.setting), rng)
    if isinstance(c, Contrast):
        a, b = arr(c.a), arr(c.b)
        n = min(a.size, b.size)  # paired by seed: runs of one seed share their SFT start
        return _resample_means(a[:n] - b[:n], rng)
    if isinstance(c, Slope):
        xs = np.array([p.x for p in c.points])
        means = np.stack([_resample_means(arr(p.setting), rng) for p in c.points], axis=1)
        xc = xs - xs.mean()
        return (means - means.mean(1, keepdims=True)) @ xc / (xc @ xc)
    if isinstance(c, Position):
        lo, mid, hi = (_resample_means(arr(s), rng) for s in (c.low, c.mid, c.high))
        den = lo - hi
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.abs(den) > 1e-9, (mid - hi) / den, np.nan)
    if isinstance(c, Correlation):
        x = np.concatenate([arr(s, c.x_metric) for s in c.settings])
        y = np.concatenate([arr(s) for s in c.settings])
        idx = np.concatenate([[np.arange(x.size)], rng.integers(0, x.size, (B, x.size))])
        xs, ys = x[idx], y[idx]
        xs = xs - xs.mean(1, keepdims=True)
        ys = ys - ys.mean(1, keepdims=True)
        den = np.sqrt((xs * xs).sum(1) * (ys * ys).sum(1))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 1e-12, (xs * ys).sum(1) / den, np.nan)
    raise TypeError(f"unknown criterion {type(c).__name__}")


def decide(c: Any, pid: str, values: Values) -> dict[str, Any]:
    """The verdict of one criterion on per-seed ``values``."""
    counts = {s: len(values.get(s, {}).get(m, [])) for s in c.settings_used()
              for m in c.metrics_used()}
    out: dict[str, Any] = {"statistic": None, "interval": None, "n_seeds": min(counts.values())}
    short = {s: n for s, n in counts.items() if n < c.min_seeds}
    if short:
        return out | {"verdict": INCONCLUSIVE, "reason": "too few seeds: " + ", ".join(
            f"{s} has {n} < {c.min_seeds}" for s, n in sorted(short.items()))}
    draws = _stat_draws(c, values, _rng(pid))
    stat, boot = draws[0], draws[1:]
    if not np.isfinite(stat):
        return out | {"verdict": INCONCLUSIVE,
                      "reason": "the statistic is undefined on these runs (zero denominator)"}
    boot = boot[np.isfinite(boot)]
    alpha = (1 - c.confidence) / 2
    lo, hi = (float(np.quantile(boot, q)) for q in (alpha, 1 - alpha))
    out |= {"statistic": float(stat), "interval": [lo, hi]}
    holds = _OPS[c.compare]
    fails = _OPS[_NEGATE[c.compare]]
    if holds(lo, c.value) and holds(hi, c.value):
        return out | {"verdict": SUPPORTED, "reason": f"the whole {c.confidence:.0%} interval "
                      f"satisfies {c.compare} {c.value:g}"}
    if fails(lo, c.value) and fails(hi, c.value):
        return out | {"verdict": REFUTED, "reason": f"the whole {c.confidence:.0%} interval "
                      f"satisfies {_NEGATE[c.compare]} {c.value:g}"}
    return out | {"verdict": INCONCLUSIVE,
                  "reason": f"the {c.confidence:.0%} interval straddles {c.value:g}"}


def verdict_entry(reg: Registry, p: Prediction, values: Values) -> dict[str, Any]:
    """Everything the results file keeps for one prediction: text, criterion, hash, verdict and
    the per-seed numbers behind it."""
    used = {s: {m: values[s][m] for m in p.criterion.metrics_used() if m in values.get(s, {})}
            for s in p.criterion.settings_used()}
    return {
        "id": p.id, "question": p.question, "prediction": p.prediction,
        "criterion": p.criterion.model_dump(mode="json"),
        "criterion_text": p.criterion.describe(),
        "hash": reg.prediction_hash(p),
        "values": used,
        **decide(p.criterion, p.id, values),
    }


def merge_entries(old: dict[str, dict[str, Any]], new: list[dict[str, Any]]
                  ) -> dict[str, dict[str, Any]]:
    """Fold freshly computed entries into the stored ones. A prediction whose hash changed keeps
    its earlier entries under ``superseded`` (oldest first): the original stays on record."""
    out = dict(old)
    for e in new:
        prev = out.get(e["id"])
        history: list[dict[str, Any]] = []
        if prev is not None:
            history = list(prev.get("superseded", []))
            if prev["hash"] != e["hash"]:
                history.append({k: v for k, v in prev.items() if k != "superseded"})
        out[e["id"]] = {**e, "superseded": history}
    return out


def status(reg: Registry, entries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per registered prediction: its stored verdict, and whether it was amended (its
    text or criterion differs from what an earlier verdict was computed against)."""
    rows = []
    for p in reg.predictions:
        e = entries.get(p.id)
        h = reg.prediction_hash(p)
        if e is None:
            rows.append({"id": p.id, "verdict": "not run", "amended": False, "stale": False,
                         "criterion_text": p.criterion.describe(), "prediction": p.prediction,
                         "question": p.question, "original": None})
            continue
        stale = e["hash"] != h  # edited after this verdict: it is the original's verdict
        original = e if stale else (e["superseded"][0] if e.get("superseded") else None)
        rows.append({**e, "amended": stale or bool(e.get("superseded")), "stale": stale,
                     "current_hash": h,
                     "criterion_text": p.criterion.describe(), "prediction": p.prediction,
                     "question": p.question,
                     "original": None if original is None else {
                         "criterion_text": original["criterion_text"],
                         "prediction": original["prediction"],
                         "verdict": original["verdict"], "hash": original["hash"],
                         "statistic": original["statistic"], "interval": original["interval"]}})
    return rows
