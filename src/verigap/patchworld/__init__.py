"""Patch World: a procedurally generated toy repair task small enough to control completely.

A program has 12 branches whose outputs follow a pattern; k are broken. The agent writes a value,
stubs or deletes each broken branch. Visible tests reach half the broken branches; a hidden
equivalence check compares all twelve with the reference.
"""

import gymnasium as gym

from verigap.patchworld.careless import CarelessConfig, careless_actions
from verigap.patchworld.env import BatchedPatchWorld, PatchWorldEnv, run_episodes
from verigap.patchworld.programs import N_BRANCHES, N_VALUES, Programs, generate, heldout_set
from verigap.patchworld.rules import DELETE, N_ACTIONS, OUTCOMES, STUB, Grades, grade

ENV_ID = "verigap/PatchWorld-v0"

if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="verigap.patchworld.env:PatchWorldEnv")

__all__ = [
    "DELETE",
    "ENV_ID",
    "N_ACTIONS",
    "N_BRANCHES",
    "N_VALUES",
    "OUTCOMES",
    "STUB",
    "BatchedPatchWorld",
    "CarelessConfig",
    "Grades",
    "PatchWorldEnv",
    "Programs",
    "careless_actions",
    "generate",
    "grade",
    "heldout_set",
    "run_episodes",
]
