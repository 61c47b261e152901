"""verigap: RL environments for code agents that measure false success.

Every episode records the reward the training signal saw and the truth separately.
"""

# First, before anything imports NumPy or PyTorch: pin their kernels (verigap/numerics.py).
from verigap import numerics  # noqa: F401
from verigap.rewards import Audit, DeletionPenalty, EpisodeChecks, Oracle, Payout, Visible
from verigap.verdict import Status, Summary, Verdict, summarize, summarize_arrays

__version__ = "0.1.0"

__all__ = [
    "Audit",
    "DeletionPenalty",
    "EpisodeChecks",
    "Oracle",
    "Payout",
    "Status",
    "Summary",
    "Verdict",
    "Visible",
    "summarize",
    "summarize_arrays",
]
