"""Running one substrate workspace in its own process, and scoring it from its metrics file.

Each run is a ``runs.Job`` whose directory name carries the hash of its workspace files and
config, so an unchanged run is found complete (``result.json``) and never runs again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from verigap import numerics
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
_BOOT = (
    "import importlib, sys; sys.path.insert(0, sys.argv[1]); "
    f"importlib.import_module('{PACKAGE}.' + sys.argv[2]).main(sys.argv[3:])"
)

# A preloaded interpreter: it imports NumPy and Torch once (about 2 CPU-s, a quarter of a
# CartPole run), then forks one child per run. The child starts from the state a fresh
# ``python -I`` has right after those imports, imports the workspace package itself, and trains;
# the numbers are the same to the bit (tests/silentbug/test_runner_preloaded.py). One request per
# line on stdin; for each, one line with the child's pid, then one with its exit code and CPU.
# Before serving, it also imports numpy.random and runs each kind of Torch op the substrates use
# once on one thread (no thread pool exists to fork; no global RNG is drawn from), so no child
# pays those first calls again (about 20 ms a run).
_PRELOADED = r"""
import importlib, json, os, sys, traceback
import numpy, numpy.random, torch

torch.set_num_threads(1)  # every run asks for one thread; OMP_NUM_THREADS=1 says so already
_w = torch.nn.init.orthogonal_(torch.empty(8, 4), generator=torch.Generator().manual_seed(0))
_w.requires_grad_()
with torch.inference_mode():
    torch.tanh(torch.nn.functional.linear(torch.ones(4, 4), _w)).numpy()
_lp = torch.log_softmax(torch.tanh(torch.nn.functional.linear(torch.ones(4, 4), _w)), -1)
_lp.gather(-1, torch.zeros(4, 1, dtype=torch.long)).mean().backward()
torch.nn.utils.clip_grad_norm_([_w], 1.0)
numpy.random.default_rng(numpy.random.SeedSequence(0).spawn(1)[0]).random(1)
del _w, _lp

for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(0)
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            sys.path.insert(0, job["workspace"])
            importlib.import_module(job["module"]).main(job["argv"])
            code = 0
        except SystemExit as e:
            if isinstance(e.code, int) or e.code is None:
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(json.dumps({"pid": pid}), flush=True)
    _, status, usage = os.wait4(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                      "cpu_s": usage.ru_utime + usage.ru_stime}), flush=True)
"""

LAST_FRACTION = 0.2


def training_env() -> dict[str, str]:
    """What a substrate's training process adds to its minimal environment: one thread, and
    the pinned kernels (``verigap.numerics``), so a run gives the same numbers on any machine."""
    return {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **numerics.env()}


def _run_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(training_env(), CUBLAS_WORKSPACE_CONFIG=":4096:8")
    return env


class _Preloaded:
    """This process's preloaded interpreter (started on first use, one run at a time)."""

    _current: _Preloaded | None = None

    def __init__(self) -> None:
        self.owner = os.getpid()  # a forked worker must not share its parent's pipes
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _PRELOADED],
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_run_env(),
        )
        atexit.register(self.close)

    @classmethod
    def get(cls) -> _Preloaded:
        cur = cls._current
        if cur is None or cur.owner != os.getpid() or cur.proc.poll() is not None:
            cls._current = cur = cls()
        return cur

    def close(self) -> None:
        if self.owner == os.getpid() and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()

    def run(
        self, workspace: Path, entry: str, argv: list[str], log: Path, timeout_s: float
    ) -> tuple[int | None, float, bool]:
        """(exit code, the child's CPU seconds, timed out) of one training run."""
        with self.lock:
            self.proc.stdin.write(
                json.dumps(
                    {
                        "workspace": str(workspace),
                        "argv": argv,
                        "module": f"{PACKAGE}.{entry}",
                        "log": str(log),
                    }
                )
                + "\n"
            )
            self.proc.stdin.flush()
            pid = json.loads(self.proc.stdout.readline())["pid"]
            fired = threading.Event()

            def kill() -> None:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
                    fired.set()

            timer = threading.Timer(timeout_s, kill)
            timer.start()
            done = json.loads(self.proc.stdout.readline())
            timer.cancel()
            return done["returncode"], done["cpu_s"], fired.is_set()


def score_episodes(
    records: list[dict[str, Any]], total_steps: int, last_fraction: float = LAST_FRACTION
) -> tuple[float, int]:
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


def learning_curve(records: list[dict[str, Any]], total_steps: int, bins: int = 5) -> list[float]:
    """Mean episode return in each of ``bins`` equal slices of the step budget (NaN if none)."""
    slices: list[list[float]] = [[] for _ in range(bins)]
    for r in records:
        if r.get("kind") == "episode":
            i = min(int(r["global_step"] * bins / total_steps), bins - 1)
            slices[i].append(r["return"])
    return [float(np.mean(s)) if s else float("nan") for s in slices]


def run_workspace(
    run_dir: Path,
    *,
    files: dict[str, str],
    entry: str,
    config: dict[str, Any],
    timeout_s: float = 900.0,
    preloaded: bool = True,
) -> dict[str, Any]:
    """Write the workspace, train in a child process, return the result (``runs`` stores it).

    ``preloaded``: fork the run from this process's preloaded interpreter (see ``_PRELOADED``;
    ``cpu_s`` is then the run's own CPU, without the imports paid once per worker); otherwise
    start a fresh ``python -I`` for it."""
    workspace = write_workspace(files, run_dir / "workspace")
    config_path = run_dir / "train_config.json"
    write_json_atomic(config_path, config)
    argv = ["--config", str(config_path), "--run-dir", str(run_dir)]
    log = run_dir / "train.log"
    started = time.time()
    if preloaded:
        try:
            returncode, cpu, timed_out = _Preloaded.get().run(
                workspace, entry, argv, log, timeout_s
            )
        except (OSError, ValueError) as e:  # the preloaded interpreter died: say so, go on
            _Preloaded._current = None
            raise RuntimeError(
                f"the preloaded interpreter failed ({e}); rerun, or pass preloaded=False"
            ) from e
        output = log.read_text(errors="replace") if log.is_file() else ""
        if timed_out:
            returncode, output = None, f"timed out after {timeout_s} s\n{output}"
        status = "timeout" if timed_out else ("ok" if returncode == 0 else "crashed")
    else:
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-c", _BOOT, str(workspace), entry, *argv],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=_run_env(),
            )
            status = "ok" if proc.returncode == 0 else "crashed"
            output, returncode = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            status, returncode = "timeout", None
            output = f"timed out after {timeout_s} s\n{e.stdout or ''}{e.stderr or ''}"
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # children of this worker are waited for one at a time: the delta is this run's CPU
        cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (
            cpu_before.ru_utime + cpu_before.ru_stime
        )
    wall = time.time() - started
    log.write_text(output if isinstance(output, str) else str(output))
    metrics = run_dir / "metrics.jsonl"
    records = read_jsonl(metrics) if metrics.is_file() else []
    score, n = score_episodes(records, int(config["total_timesteps"]))
    iterations = [r for r in records if r.get("kind") == "iteration"]
    return {
        "status": status,
        "returncode": returncode,
        "score": score,
        "scored_episodes": n,
        "episodes": sum(1 for r in records if r.get("kind") == "episode"),
        "iterations": len(iterations),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "sps": iterations[-1]["sps"] if iterations else None,
        "seed": config["seed"],
    }


def versions() -> dict[str, str]:
    """Library versions and kernels a run's numbers depend on; part of every cache key, so
    upgrading NumPy or Torch, or running unpinned (``verigap.numerics``), reruns instead of
    reusing numbers it did not produce."""
    import platform

    import torch

    pin = numerics.PIN_NAME if numerics.mode() == "pinned" else numerics.mode()
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "numerics": pin,
    }


def plan_run(
    cache_dir: Path,
    substrate: str,
    label: str,
    files: dict[str, str],
    overrides: dict[str, Any],
    seed: int,
    timeout_s: float = 900.0,
) -> Job:
    """A cached job: its directory is keyed by the hash of workspace files + full config."""
    sub = SUBSTRATES[substrate]
    files = workspace_files(substrate, files)
    config = {**sub.config, **overrides, "seed": seed}
    key = content_hash(files, {"entry": sub.entry, "config": config, "versions": versions()})
    run_dir = cache_dir / substrate / label / f"seed{seed}-{key[:16]}"
    return Job(
        name=f"{substrate}/{label}/seed{seed}",
        run_dir=run_dir,
        fn=run_workspace,
        kwargs={"files": files, "entry": sub.entry, "config": config, "timeout_s": timeout_s},
    )
