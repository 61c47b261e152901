"""The red-team battery: exploit agents, the battery runner and the hackability matrix."""

from verigap.repos.redteam import exploits as _exploits  # noqa: F401  (registry first)
