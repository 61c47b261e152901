"""Silent bugs in RL training code: PPO substrates, a calibrated bug bank, ablation.

A silent bug trains without crashing and only shows as a policy that learns less. The bank keeps
a bug only if calibration shows it hurts (clean - broken >= 3 x the larger seed std), and an
omission bug only where the ablation showed the omitted mechanism is load-bearing.
"""

from verigap.silentbug.bank import Bug, Registry, check_bug, load_registry
from verigap.silentbug.patching import PatchError, apply_unified_diff

__all__ = ["Bug", "PatchError", "Registry", "apply_unified_diff", "check_bug", "load_registry"]
