"""Rates with their uncertainty: every detection figure is a count out of a count, reported
with a Wilson score interval, so 1 of 11 and 94 of 100 are never read as equally sure."""

from __future__ import annotations

import math
from typing import Any


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval (95% by default) for ``k`` successes out of ``n``; None when
    ``n`` is 0. Unlike the normal approximation it stays inside [0, 1] at 0 and n."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def rate(k: int, n: int) -> dict[str, Any]:
    """``{"k", "n", "rate", "ci95"}`` (rate and interval None when ``n`` is 0)."""
    ci = wilson(k, n)
    return {
        "k": k,
        "n": n,
        "rate": round(k / n, 4) if n else None,
        "ci95": list(ci) if ci else None,
    }


def fmt_rate(r: dict[str, Any]) -> str:
    """A :func:`rate` as a table cell: ``k/n (rate; 95% CI lo-hi)``, or ``-`` when n is 0."""
    if r["rate"] is None:
        return "-"
    lo, hi = r["ci95"]
    return f"{r['k']}/{r['n']} ({r['rate']:.0%}; 95% CI {lo:.0%}-{hi:.0%})"


def per_class(
    labels: list[set[str]], named: list[set[str]], classes: set[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per class: recall (episodes labelled with it that were named with it) and precision
    (episodes named with it that are labelled with it), each with its interval."""
    names = classes if classes is not None else set().union(*labels, *named) if labels else set()
    out = {}
    for c in sorted(names):
        lab = [c in x for x in labels]
        got = [c in x for x in named]
        tp = sum(a and b for a, b in zip(lab, got, strict=True))
        out[c] = {"recall": rate(tp, sum(lab)), "precision": rate(tp, sum(got))}
    return out
