"""Verdicts computed from the criteria: a statistic per seed, an interval over seeds, a call.

A prediction says ``statistic COMPARE value``. The current rule (:data:`RULE`) computes the
statistic on each seed's runs alone (runs of one seed share their SFT start, so settings are
paired by seed) and a Student-t interval ``[lo, hi]`` of their mean at the criterion's
confidence:

- **supported** when every seed satisfies the comparison *and* the whole interval does,
- **refuted** when every seed satisfies its negation *and* the whole interval does,
- **inconclusive** otherwise: the seeds disagree or the interval straddles the value, a
  setting has fewer seeds than ``min_seeds``, or the statistic is undefined on some seed.

Why not the percentile bootstrap the log started with (:data:`BOOTSTRAP_RULE`, kept as
:func:`decide_bootstrap`): with 3 seeds its interval is narrower than the seeds' range, so a
verdict could go against a seed. The rule change is recorded as an amendment: :func:`rejudge`
recomputes stored entries from their stored per-seed values and keeps each earlier entry under
``superseded``, the way an edited criterion keeps its original.
"""

from __future__ import annotations

import hashlib
import math
import operator
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from verigap.experiments.registry import (
    Contrast,
    Correlation,
    Criterion,
    Position,
    Prediction,
    Registry,
    Slope,
    Threshold,
)

B = 2000
#: the rule every new verdict is made by, and the one the log's first verdicts were made by
RULE = "all-seeds-and-t"
BOOTSTRAP_RULE = "percentile-bootstrap"
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


def _seed_counts(c: Any, values: Values) -> dict[str, int]:
    return {
        s: len(values.get(s, {}).get(m, [])) for s in c.settings_used() for m in c.metrics_used()
    }


def decide_bootstrap(c: Any, pid: str, values: Values) -> dict[str, Any]:
    """The verdict of one criterion under the log's first rule, the percentile bootstrap."""
    counts = {
        s: len(values.get(s, {}).get(m, [])) for s in c.settings_used() for m in c.metrics_used()
    }
    out: dict[str, Any] = {"statistic": None, "interval": None, "n_seeds": min(counts.values())}
    short = {s: n for s, n in counts.items() if n < c.min_seeds}
    if short:
        return out | {
            "verdict": INCONCLUSIVE,
            "reason": "too few seeds: "
            + ", ".join(f"{s} has {n} < {c.min_seeds}" for s, n in sorted(short.items())),
        }
    draws = _stat_draws(c, values, _rng(pid))
    stat, boot = draws[0], draws[1:]
    if not np.isfinite(stat):
        return out | {
            "verdict": INCONCLUSIVE,
            "reason": "the statistic is undefined on these runs (zero denominator)",
        }
    boot = boot[np.isfinite(boot)]
    alpha = (1 - c.confidence) / 2
    lo, hi = (float(np.quantile(boot, q)) for q in (alpha, 1 - alpha))
    out |= {"statistic": float(stat), "interval": [lo, hi]}
    holds = _OPS[c.compare]
    fails = _OPS[_NEGATE[c.compare]]
    if holds(lo, c.value) and holds(hi, c.value):
        return out | {
            "verdict": SUPPORTED,
            "reason": f"the whole {c.confidence:.0%} interval satisfies {c.compare} {c.value:g}",
        }
    if fails(lo, c.value) and fails(hi, c.value):
        return out | {
            "verdict": REFUTED,
            "reason": f"the whole {c.confidence:.0%} interval "
            f"satisfies {_NEGATE[c.compare]} {c.value:g}",
        }
    return out | {
        "verdict": INCONCLUSIVE,
        "reason": f"the {c.confidence:.0%} interval straddles {c.value:g}",
    }


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p >= 0.5) of Student's t with ``df`` degrees of freedom: bisection
    on its CDF, integrated by Simpson's rule from the density (no SciPy in the dependencies)."""
    if not 0.5 <= p < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1 and df >= 1, got p={p}, df={df}")
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(t: float) -> float:
        x = np.linspace(0.0, t, 4001)
        f = np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))
        h = t / 4000
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def seed_statistics(c: Any, values: Values) -> np.ndarray:
    """The criterion's statistic computed on each seed's runs alone (seed ``i`` of every setting
    it uses); NaN where it is undefined on a seed (a zero denominator, a flat correlation)."""

    def arr(setting: str, metric: str | None = None) -> np.ndarray:
        return np.asarray(values[setting][metric or c.metric], dtype=float)

    n = min(_seed_counts(c, values).values())
    if isinstance(c, Threshold):
        return arr(c.setting)[:n]
    if isinstance(c, Contrast):
        return arr(c.a)[:n] - arr(c.b)[:n]
    if isinstance(c, Slope):
        xs = np.array([p.x for p in c.points])
        ys = np.stack([arr(p.setting)[:n] for p in c.points])  # (points, seeds)
        xc = xs - xs.mean()
        return xc @ (ys - ys.mean(0)) / (xc @ xc)
    if isinstance(c, Position):
        lo, mid, hi = (arr(s)[:n] for s in (c.low, c.mid, c.high))
        den = lo - hi
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.abs(den) > 1e-9, (mid - hi) / den, np.nan)
    if isinstance(c, Correlation):
        x = np.stack([arr(s, c.x_metric)[:n] for s in c.settings])  # (settings, seeds)
        y = np.stack([arr(s)[:n] for s in c.settings])
        if len(c.settings) < 3:  # two points always correlate perfectly
            return np.full(n, np.nan)
        x, y = x - x.mean(0), y - y.mean(0)
        den = np.sqrt((x * x).sum(0) * (y * y).sum(0))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 1e-12, (x * y).sum(0) / den, np.nan)
    raise TypeError(f"unknown criterion {type(c).__name__}")


def decide(c: Any, pid: str, values: Values) -> dict[str, Any]:
    """The verdict of one criterion on per-seed ``values`` under :data:`RULE`. ``pid`` is
    unused by this rule (nothing is random); it is kept so both rules share a signature."""
    del pid
    counts = _seed_counts(c, values)
    out: dict[str, Any] = {
        "statistic": None,
        "interval": None,
        "seed_statistics": None,
        "n_seeds": min(counts.values()),
        "rule": RULE,
    }
    short = {s: n for s, n in counts.items() if n < max(c.min_seeds, 2)}
    if short:
        return out | {
            "verdict": INCONCLUSIVE,
            "reason": "too few seeds: "
            + ", ".join(f"{s} has {n} < {max(c.min_seeds, 2)}" for s, n in sorted(short.items())),
        }
    per_seed = seed_statistics(c, values)
    out["seed_statistics"] = [float(x) if np.isfinite(x) else None for x in per_seed]
    if not np.isfinite(per_seed).all():
        bad = [i for i, x in enumerate(per_seed) if not np.isfinite(x)]
        return out | {
            "verdict": INCONCLUSIVE,
            "reason": "the statistic is undefined on seed "
            f"position(s) {bad} (zero denominator or flat values)",
        }
    n = per_seed.size
    mean = float(per_seed.mean())
    half = t_quantile(1 - (1 - c.confidence) / 2, n - 1) * float(per_seed.std(ddof=1)) / n**0.5
    lo, hi = mean - half, mean + half
    out |= {"statistic": mean, "interval": [lo, hi]}
    holds, fails = _OPS[c.compare], _OPS[_NEGATE[c.compare]]
    n_hold = int(sum(holds(x, c.value) for x in per_seed))
    seeds_say = f"{n_hold} of {n} seeds satisfy {c.compare} {c.value:g}"
    iv = f"{c.confidence:.0%} t interval"
    if n_hold == n and holds(lo, c.value) and holds(hi, c.value):
        return out | {"verdict": SUPPORTED, "reason": f"{seeds_say}, and so does the whole {iv}"}
    if n_hold == 0 and fails(lo, c.value) and fails(hi, c.value):
        return out | {
            "verdict": REFUTED,
            "reason": f"{seeds_say}; the whole {iv} satisfies {_NEGATE[c.compare]} {c.value:g}",
        }
    if 0 < n_hold < n:
        return out | {"verdict": INCONCLUSIVE, "reason": f"the seeds disagree: {seeds_say}"}
    return out | {
        "verdict": INCONCLUSIVE,
        "reason": f"{seeds_say}, but the {iv} straddles {c.value:g}",
    }


def verdict_entry(reg: Registry, p: Prediction, values: Values) -> dict[str, Any]:
    """Everything the results file keeps for one prediction: text, criterion, hash, verdict and
    the per-seed numbers behind it."""
    used = {
        s: {m: values[s][m] for m in p.criterion.metrics_used() if m in values.get(s, {})}
        for s in p.criterion.settings_used()
    }
    return {
        "id": p.id,
        "question": p.question,
        "prediction": p.prediction,
        "criterion": p.criterion.model_dump(mode="json"),
        "criterion_text": p.criterion.describe(),
        "hash": reg.prediction_hash(p),
        "sanity_check": p.sanity_check,
        "values": used,
        **decide(p.criterion, p.id, values),
    }


def merge_entries(
    old: dict[str, dict[str, Any]], new: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Fold freshly computed entries into the stored ones. A prediction whose hash, verdict
    rule or per-seed values changed (a rerun that did not reproduce them) keeps its earlier
    entries under ``superseded`` (oldest first): the original stays on record."""
    out = dict(old)
    for e in new:
        prev = out.get(e["id"])
        history: list[dict[str, Any]] = []
        if prev is not None:
            history = list(prev.get("superseded", []))
            if (
                prev["hash"] != e["hash"]
                or rule_of(prev) != rule_of(e)
                or prev.get("values") != e.get("values")
            ):
                history.append({k: v for k, v in prev.items() if k != "superseded"})
        out[e["id"]] = {**e, "superseded": history}
    return out


def rule_of(entry: dict[str, Any]) -> str:
    """The rule a stored entry was judged by (entries from before rules were named: the
    percentile bootstrap)."""
    return entry.get("rule", BOOTSTRAP_RULE)


_CRITERION = TypeAdapter(Criterion)


def rejudge(reg: Registry, entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every stored entry judged again by :data:`RULE` from the per-seed values it stores (no
    run is redone), against the criterion it stores, so a stale entry stays the original's
    verdict. An entry judged by another rule moves under ``superseded``; the sanity-check
    marking is refreshed from the registry (it is not part of the hash)."""
    known = {p.id: p for p in reg.predictions}
    out: dict[str, dict[str, Any]] = {}
    for pid, prev in entries.items():
        p = known.get(pid)
        mark = p.sanity_check if p is not None else prev.get("sanity_check")
        if rule_of(prev) == RULE:
            out[pid] = {**prev, "sanity_check": mark}
            continue
        c = _CRITERION.validate_python(prev["criterion"])
        fresh = {k: v for k, v in prev.items() if k != "superseded"}
        for k in ("reason", "interval", "statistic", "n_seeds", "verdict"):
            fresh.pop(k, None)
        fresh |= {"sanity_check": mark, **decide(c, pid, prev["values"])}
        out[pid] = merge_entries({pid: prev}, [fresh])[pid]
    return out


def rule_changes(entries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """What the rule change alone did: for every entry judged by :data:`RULE` whose criterion
    has a verdict under an earlier rule, that verdict beside the current rule's verdict *on the
    same per-seed values* (recomputed, so a later rerun with other values does not count as a
    change of rule)."""
    rows = []
    for pid, e in sorted(entries.items()):
        if rule_of(e) != RULE:
            continue
        before = [
            s for s in e.get("superseded", []) if s["hash"] == e["hash"] and rule_of(s) != RULE
        ]
        if before:
            b = before[-1]
            after = decide(_CRITERION.validate_python(b["criterion"]), pid, b["values"])
            rows.append(
                {
                    "id": pid,
                    "sanity_check": bool(e.get("sanity_check")),
                    "rule": rule_of(b),
                    "before": b["verdict"],
                    "after": after["verdict"],
                }
            )
    return rows


def log_summary(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What a verdicts file states about itself, so a document can quote it through a marker:
    the rule, the tally (sanity checks apart) and what the rule amendment changed."""
    t = tally(entries.values())
    changes = [r for r in rule_changes(entries) if not r["sanity_check"]]
    return {
        "rule": RULE,
        **t,
        **{f"n_{v}": t["predictions"].get(v, 0) for v in (SUPPORTED, REFUTED, INCONCLUSIVE)},
        "n_sanity_checks_held": t["sanity_checks"].get(SUPPORTED, 0),
        "rule_changes": changes,
        "n_rule_judged": len(changes),
        "n_rule_changed": sum(r["before"] != r["after"] for r in changes),
    }


def first_rule_verdict(entry: dict[str, Any]) -> str | None:
    """The verdict this entry's criterion got under the rule before the current one, if any."""
    before = [
        s
        for s in entry.get("superseded", [])
        if s["hash"] == entry["hash"] and rule_of(s) != rule_of(entry)
    ]
    return before[-1]["verdict"] if before else None


def entry_label(entry: dict[str, Any]) -> str:
    """The verdict as a table shows it: sanity checks and amended criteria say so."""
    amended = any(s["hash"] != entry["hash"] for s in entry.get("superseded", []))
    return (
        ("sanity check: " if entry.get("sanity_check") else "")
        + entry["verdict"]
        + (" (amended)" if amended else "")
    )


def tally(entries: Any) -> dict[str, Any]:
    """Verdict counts of the predictions, with the sanity checks counted apart: a criterion that
    cannot fail by construction is no evidence for or against anything."""
    preds: dict[str, int] = {}
    checks: dict[str, int] = {}
    for e in entries:
        into = checks if e.get("sanity_check") else preds
        into[e["verdict"]] = into.get(e["verdict"], 0) + 1
    return {
        "predictions": preds,
        "n_predictions": sum(preds.values()),
        "sanity_checks": checks,
        "n_sanity_checks": sum(checks.values()),
    }


def tally_text(entries: Any) -> str:
    """The tally in words: "30 supported, 13 refuted of 43 predictions; 3 sanity checks (3
    held)"."""
    t = tally(entries)
    order = ("supported", "refuted", "inconclusive", "not run")
    parts = ", ".join(f"{t['predictions'][k]} {k}" for k in order if k in t["predictions"])
    text = f"{parts} of {t['n_predictions']} predictions"
    if t["n_sanity_checks"]:
        held = t["sanity_checks"].get(SUPPORTED, 0)
        text += (
            f"; {t['n_sanity_checks']} sanity check{'s' if t['n_sanity_checks'] != 1 else ''}"
            f" apart ({held} held)"
        )
    return text


def status(reg: Registry, entries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per registered prediction: its stored verdict, and whether it was amended (its
    text or criterion differs from what an earlier verdict was computed against)."""
    rows = []
    for p in reg.predictions:
        e = entries.get(p.id)
        h = reg.prediction_hash(p)
        if e is None:
            rows.append(
                {
                    "id": p.id,
                    "verdict": "not run",
                    "amended": False,
                    "stale": False,
                    "criterion_text": p.criterion.describe(),
                    "prediction": p.prediction,
                    "question": p.question,
                    "original": None,
                    "rule_original": None,
                    "sanity_check": p.sanity_check,
                }
            )
            continue
        stale = e["hash"] != h  # edited after this verdict: it is the original's verdict
        edits = [s for s in e.get("superseded", []) if s["hash"] != e["hash"]]
        original = e if stale else (edits[0] if edits else None)
        by_rule = [
            s
            for s in e.get("superseded", [])
            if s["hash"] == e["hash"] and rule_of(s) != rule_of(e)
        ]
        rows.append(
            {
                **e,
                "amended": stale or bool(edits),
                "stale": stale,
                "current_hash": h,
                "sanity_check": p.sanity_check,
                "rule_original": None
                if not by_rule
                else {
                    "rule": rule_of(by_rule[-1]),
                    "verdict": by_rule[-1]["verdict"],
                    "statistic": by_rule[-1]["statistic"],
                    "interval": by_rule[-1]["interval"],
                },
                "criterion_text": p.criterion.describe(),
                "prediction": p.prediction,
                "question": p.question,
                "original": None
                if original is None
                else {
                    "criterion_text": original["criterion_text"],
                    "prediction": original["prediction"],
                    "verdict": original["verdict"],
                    "hash": original["hash"],
                    "statistic": original["statistic"],
                    "interval": original["interval"],
                },
            }
        )
    return rows
