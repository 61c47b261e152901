"""Running one substrate workspace in its own process, and scoring it from its metrics file.

Each run is a ``runs.Job`` whose directory name carries the hash of its workspace files and
config, so an unchanged run is found complete (``result.json``) and never runs again.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from verigap.runs import Job, read_jsonl, write_json_atomic
from verigap.silentbug.substrate import (
    PACKAGE,
    SUBSTRATES,
    content_hash,
    workspace_files,
    write_workspace,
)

# Run the workspace package's entry in a process isolated from the environment (-I): the
# workspace, not the installed verigap, is what gets imported.
_BOOT = ("import importlib, sys; sys.path.insert(0, sys.argv[1]); "
         f"importlib.import_module('{PACKAGE}.' + sys.argv[2]).main(sys.argv[3:])")

LAST_FRACTION = 0.2


def score_episodes(records: list[dict[str, Any]], total_steps: int,
                   last_fraction: float = LAST_FRACTION) -> tuple[float, int]:
    """Mean return of the episodes that ended in the last ``last_fraction`` of the steps, and
    how many there were (falls back to the final 10 episodes if none ended there)."""
    episodes = [r for r in records if r.get("kind") == "episode"]
    if not episodes:
        return float("nan"), 0
    cutoff = (1.0 - last_fraction) * total_steps
    late = [r["return"] for r in episodes if r["global_step"] > cutoff]
    if not late:
        late = [r["return"] for r in episodes[-10:]]
    return float(np.mean(late)), len(late)


def learning_curve(records: list[dict[str, Any]], total_steps: int, bins: int = 5
                   ) -> list[float]:
    """Mean episode return in each of ``bins`` equal slices of the step budget (NaN if none)."""
    slices: list[list[float]] = [[] for _ in range(bins)]
    for r in records:
        if r.get("kind") == "episode":
            i = min(int(r["global_step"] * bins / total_steps), bins - 1)
            slices[i].append(r["return"])
    return [float(np.mean(s)) if s else float("nan") for s in slices]


def run_workspace(run_dir: Path, *, files: dict[str, str], entry: str, config: dict[str, Any],
                  timeout_s: float = 900.0) -> dict[str, Any]:
    """Write the workspace, train in a subprocess, return the result (``runs`` stores it)."""
    workspace = write_workspace(files, run_dir / "workspace")
    config_path = run_dir / "train_config.json"
    write_json_atomic(config_path, config)
    cmd = [sys.executable, "-I", "-c", _BOOT, str(workspace), entry,
           "--config", str(config_path), "--run-dir", str(run_dir)]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUBLAS_WORKSPACE_CONFIG=":4096:8")
    started = time.time()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        status = "ok" if proc.returncode == 0 else "crashed"
        output, returncode = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        status, returncode = "timeout", None
        output = f"timed out after {timeout_s} s\n{e.stdout or ''}{e.stderr or ''}"
    wall = time.time() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # children of this worker are waited for one at a time, so the delta is this run's CPU time
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    (run_dir / "train.log").write_text(output if isinstance(output, str) else str(output))
    metrics = run_dir / "metrics.jsonl"
    records = read_jsonl(metrics) if metrics.is_file() else []
    score, n = score_episodes(records, int(config["total_timesteps"]))
    iterations = [r for r in records if r.get("kind") == "iteration"]
    return {"status": status, "returncode": returncode, "score": score, "scored_episodes": n,
            "episodes": sum(1 for r in records if r.get("kind") == "episode"),
            "iterations": len(iterations), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "sps": iterations[-1]["sps"] if iterations else None, "seed": config["seed"]}


def versions() -> dict[str, str]:
    """Library versions a run's numbers depend on; part of every cache key, so upgrading
    NumPy or Torch reruns instead of reusing numbers it did not produce."""
    import platform

    import torch

    return {"python": platform.python_version(), "numpy": np.__version__,
            "torch": torch.__version__}


def plan_run(cache_dir: Path, substrate: str, label: str, files: dict[str, str],
             overrides: dict[str, Any], seed: int, timeout_s: float = 900.0) -> Job:
    """A cached job: its directory is keyed by the hash of workspace files + full config."""
    sub = SUBSTRATES[substrate]
    files = workspace_files(substrate, files)
    config = {**sub.config, **overrides, "seed": seed}
    key = content_hash(files, {"entry": sub.entry, "config": config, "versions": versions()})
    run_dir = cache_dir / substrate / label / f"seed{seed}-{key[:16]}"
    return Job(name=f"{substrate}/{label}/seed{seed}", run_dir=run_dir, fn=run_workspace,
               kwargs={"files": files, "entry": sub.entry, "config": config,
                       "timeout_s": timeout_s})
