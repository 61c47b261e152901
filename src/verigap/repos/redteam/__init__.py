"""The red-team battery: exploit agents, the battery runner and the hackability matrix."""

from verigap.repos.redteam import catalogue as _catalogue  # noqa: F401  (the whole battery)
