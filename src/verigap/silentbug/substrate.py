"""The substrates a bug can target: which code runs, on which task, at which budget.

A substrate is the pristine ``substrates`` package plus an entry module and a base config. A
workspace is a copy of that package (optionally patched) that runs in its own ``python -I``
process, so the pristine files are never modified and never imported by a broken run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

SubstrateName = Literal["cartpole_single", "cartpole_modular", "acrobot_modular"]
Mechanism = Literal[
    "grad_clip",
    "adv_norm",
    "entropy_bonus",
    "value_clip",
    "bootstrap",
    "value_loss",
    "gae_trace",
    "lr_decay",
]

PACKAGE = "substrates"  # the name the copied package has inside a workspace


@dataclass(frozen=True)
class Substrate:
    name: str
    entry: str  # module inside the workspace package that has main(argv)
    config: dict[str, Any]
    """the fixed calibration budget and task (overrides of the entry's config defaults)"""
    files: tuple[str, ...] = ("__init__.py", "envs.py")
    """the package files its workspace holds (a directory name takes everything under it), so
    editing one substrate does not invalidate the cached runs of another"""
    ablations: dict[str, dict[str, Any]] = field(default_factory=dict)
    """mechanism -> config override that removes it from the clean code"""
    description: str = ""


_MODULAR_ABLATIONS: dict[str, dict[str, Any]] = {
    "grad_clip": {"grad_clip": 0.0},
    "adv_norm": {"normalize_advantages": False},
    "entropy_bonus": {"entropy_weight": 0.0},
    "value_clip": {"clip_value_loss": False},
    "bootstrap": {"bootstrap": False},
    "value_loss": {"value_weight": 0.0},
    "gae_trace": {"trace_decay": 0.0},
    "lr_decay": {"lr_decay": False},
}

_MODULAR_FILES = ("__init__.py", "envs.py", "ppo_modular")

SUBSTRATES: dict[str, Substrate] = {
    "cartpole_single": Substrate(
        "cartpole_single",
        "ppo_single",
        {"env_id": "CartPole-v1", "total_timesteps": 40_000},
        ("__init__.py", "envs.py", "ppo_single.py"),
        description="single-file PPO, CartPole-v1, 40k steps (4 envs x 128 steps)",
    ),
    "cartpole_modular": Substrate(
        "cartpole_modular",
        "ppo_modular.train",
        {"env_id": "CartPole-v1", "total_timesteps": 40_000},
        _MODULAR_FILES,
        _MODULAR_ABLATIONS,
        description="modular PPO, CartPole-v1, 40k steps (4 envs x 128 steps)",
    ),
    "acrobot_modular": Substrate(
        "acrobot_modular",
        "ppo_modular.train",
        {
            "env_id": "Acrobot-v1",
            "total_timesteps": 150_000,
            "n_workers": 16,
            "horizon": 32,
            "lr": 1e-3,
            "reward_scale": 0.01,
        },
        _MODULAR_FILES,
        _MODULAR_ABLATIONS,
        description=(
            "modular PPO, Acrobot-v1, 150k steps (16 envs x 32 steps, lr 1e-3, "
            "rewards x 0.01 so value targets are O(1))"
        ),
    ),
}


def substrate_root() -> Path:
    """The pristine substrates package on disk (works from a checkout and an install)."""
    return Path(str(resources.files("verigap.silentbug") / "substrates"))


def pristine_files() -> dict[str, str]:
    """Relative path -> text of every source file of the substrates package."""
    root = substrate_root()
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def workspace_files(substrate: str, files: dict[str, str]) -> dict[str, str]:
    """The subset of ``files`` (pristine or patched) that ``substrate``'s workspace holds."""
    keep = SUBSTRATES[substrate].files
    return {
        rel: text
        for rel, text in files.items()
        if any(rel == k or rel.startswith(k.rstrip("/") + "/") for k in keep)
    }


def content_hash(files: dict[str, str], config: dict[str, Any]) -> str:
    """Hash of a workspace's files and its run config: the cache key of a run."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel].encode() + b"\0")
    h.update(json.dumps(config, sort_keys=True).encode())
    return h.hexdigest()


def write_workspace(files: dict[str, str], dest: Path) -> Path:
    """Write the (possibly patched) package under ``dest/substrates``; return ``dest``."""
    for rel, text in files.items():
        path = dest / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return dest
