"""The acceptance rule shared by calibration and ablation, on plain numbers."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SIGMAS = 3.0


@dataclass(frozen=True)
class Arm:
    """Scores of one configuration over seeds; ``std`` is the sample std (ddof=1)."""

    scores: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores else float("nan")

    @property
    def std(self) -> float:
        return float(np.std(self.scores, ddof=1)) if len(self.scores) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"scores": list(self.scores), "mean": self.mean, "std": self.std}


@dataclass(frozen=True)
class Gap:
    """clean - other, and whether it clears SIGMAS x the larger seed standard deviation."""

    margin: float
    threshold: float
    clears: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gap(clean: Arm, other: Arm, sigmas: float = SIGMAS) -> Gap:
    """A degradation counts only if it is positive and at least ``sigmas`` x max(seed std).

    With one seed there is no spread to compare against, so nothing clears the rule.
    """
    margin = clean.mean - other.mean
    threshold = sigmas * max(clean.std, other.std)
    enough_seeds = len(clean.scores) > 1 and len(other.scores) > 1
    clears = enough_seeds and math.isfinite(margin) and margin > 0 and margin >= threshold
    return Gap(margin, threshold, bool(clears))
