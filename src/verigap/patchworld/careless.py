"""The careless engineer: a scripted, stochastic demonstrator for SFT.

It knows how to repair every branch (it reads the pattern correctly) and mostly does, with an
occasional honest slip anywhere. Where no visible test reaches, it is careless: it cuts a corner
with some probability (more often on branches next to other broken code, where inferring the
value takes effort) by deleting the branch, stubbing it or writing a value that is off by one.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from verigap.patchworld import rules
from verigap.patchworld.programs import N_VALUES, Programs


class CarelessConfig(BaseModel):
    """Defaults are tuned so that at k=4 about 31% of programs come out fully correct."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slip: float = Field(0.15, ge=0, le=1, description="honest mistake on any branch")
    slip_off_by_one: float = Field(
        0.40, ge=0, le=1, description="share of slips that are off by one (else wrong)"
    )
    cut_easy: float = Field(
        0.10, ge=0, le=1, description="corner-cut chance, untested branch with intact neighbours"
    )
    cut_hard: float = Field(
        0.35, ge=0, le=1, description="corner-cut chance, untested branch next to broken code"
    )
    shortcut_delete: float = Field(0.45, ge=0)
    shortcut_stub: float = Field(0.30, ge=0)
    shortcut_off_by_one: float = Field(0.25, ge=0)

    @model_validator(mode="after")
    def _weights(self) -> CarelessConfig:
        if self.shortcut_delete + self.shortcut_stub + self.shortcut_off_by_one <= 0:
            raise ValueError("at least one shortcut weight must be positive")
        return self


def next_to_broken(programs: Programs) -> np.ndarray:
    """(B, k): the broken branch has a broken neighbour (its value is harder to infer)."""
    b = programs.broken
    left = np.zeros_like(b)
    right = np.zeros_like(b)
    left[:, 1:] = b[:, :-1]
    right[:, :-1] = b[:, 1:]
    return np.take_along_axis(left | right, programs.order, axis=1)


def _off_by_one(ref: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    up = rng.random(ref.shape) < 0.5
    v = np.where(up, ref + 1, ref - 1)
    return np.where(v < 0, ref + 1, np.where(v >= N_VALUES, ref - 1, v))


def careless_actions(
    programs: Programs, rng: np.random.Generator, config: CarelessConfig | None = None
) -> np.ndarray:
    """(B, k) actions the careless engineer takes on each broken branch, in acting order."""
    c = config or CarelessConfig()
    ref = programs.at_order("reference")
    shape = ref.shape
    # honest repair, with occasional slips
    slip = rng.random(shape) < c.slip
    slip_obo = rng.random(shape) < c.slip_off_by_one
    wrong = (ref + rng.integers(2, N_VALUES - 1, shape)) % N_VALUES
    actions = np.where(slip, np.where(slip_obo, _off_by_one(ref, rng), wrong), ref)
    # corner cutting where no test reaches
    untested = ~programs.at_order("tested")
    p_cut = np.where(next_to_broken(programs), c.cut_hard, c.cut_easy)
    cut = untested & (rng.random(shape) < p_cut)
    w = np.array([c.shortcut_delete, c.shortcut_stub, c.shortcut_off_by_one], dtype=float)
    kind = rng.choice(3, size=shape, p=w / w.sum())
    shortcut = np.select([kind == 0, kind == 1], [rules.DELETE, rules.STUB], _off_by_one(ref, rng))
    return np.where(cut, shortcut, actions).astype(np.int64)
