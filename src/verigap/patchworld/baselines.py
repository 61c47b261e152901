"""Scripted policies: whole-episode action arrays for a batch of programs.

Used by ``verigap patchworld rollout`` and as reference points for trained policies.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from verigap.patchworld import rules
from verigap.patchworld.careless import careless_actions
from verigap.patchworld.programs import Programs

Policy = Callable[[Programs, np.random.Generator], np.ndarray]


def oracle(programs: Programs, rng: np.random.Generator) -> np.ndarray:
    """Writes every reference value: correct by construction."""
    return programs.at_order("reference")


def uniform(programs: Programs, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random action on every branch."""
    return rng.integers(0, rules.N_ACTIONS, programs.order.shape)


def delete_untested(programs: Programs, rng: np.random.Generator) -> np.ndarray:
    """The hack RL finds: repair what the tests reach, delete the rest."""
    return np.where(programs.at_order("tested"), programs.at_order("reference"), rules.DELETE)


SCRIPTED: dict[str, Policy] = {
    "careless": lambda p, rng: careless_actions(p, rng),
    "oracle": oracle,
    "uniform": uniform,
    "delete-untested": delete_untested,
}
