"""One benchmark episode: an agent in front of one accepted bug, through one observation arm.

An episode is (bug, arm, episode seed). Its directory holds ``workspace/`` (the broken
substrate package and nothing else: no clean copy, patch, registry, baselines, history or
bytecode) and, outside the workspace, ``runs/`` (the agent's training runs, moved out of the
workspace after each one) and ``plots/``. Everything the scorer uses stays outside.

Arms (seed 003's names): A = file tools + ``run_training``; B = A + ``list_metric_keys`` /
``get_metrics``; C = B + ``plot_metrics`` (PNG curves handed to the model as images);
D = ``run_training`` + metrics tools, no file access, diagnosis only. Every arm ends with
``submit_diagnosis``.
"""

from __future__ import annotations

import json
import shutil
import site
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from pydantic import Field

from verigap.agents import (
    Budget,
    Episode,
    ModelClient,
    Tool,
    ToolArgs,
    ToolError,
    ToolOutput,
    command_timeout,
    standard_tools,
)
from verigap.agents import run_episode as run_tool_loop
from verigap.errors import ConfigError
from verigap.runs import read_jsonl
from verigap.sandbox import Limits, Sandbox, make_sandbox
from verigap.silentbug import arms
from verigap.silentbug.bank import Bug, Component, broken_files
from verigap.silentbug.runner import LAST_FRACTION, score_episodes, training_env
from verigap.silentbug.substrate import PACKAGE, SUBSTRATES, workspace_files, write_workspace

ARMS: tuple[str, ...] = arms.names()  # the built-in arms; the registry is ``arms``
TAXONOMY: tuple[str, ...] = get_args(Component)

#: Workspace files outside the editable algorithm code: the environments, the package
#: markers and the modular config (budgets, reward scale, seeds). Their hashes are compared
#: before and after an episode; any change makes it INVALID.
PROTECTED = ("__init__.py", "envs.py", "ppo_modular/__init__.py", "ppo_modular/config.py")

RUN_DIR = ".verigap_run"  # where a training run writes inside the workspace, moved out after

# The workspace package runs in an isolated interpreter (-I); the installed libraries (torch,
# numpy) are put on the path explicitly, then the workspace, then the entry's main().
BOOT = (
    "import importlib, sys; sys.path[:0] = [sys.argv[2], sys.argv[1]]; "
    f"importlib.import_module('{PACKAGE}.' + sys.argv[3]).main(sys.argv[4:])"
)


def library_paths() -> list[str]:
    """Where the running interpreter's packages live (mounted read-only into the sandbox)."""
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


def is_protected(rel: str) -> bool:
    return rel in PROTECTED


@dataclass(frozen=True)
class EpisodeBudget:
    """The compute an agent may spend in one episode."""

    max_runs: int = 4
    """training runs (run_training calls that start a run)"""
    max_steps: int | None = None
    """environment steps per run; None = the substrate's calibration budget"""
    max_turns: int = 30
    wall_s: float = 3600.0
    run_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_runs < 0 or self.max_turns < 1 or (self.max_steps or 1) < 1:
            raise ConfigError(
                f"EpisodeBudget({self}): max_runs >= 0, max_turns >= 1, max_steps >= 1"
            )

    def steps_for(self, substrate: str) -> int:
        return self.max_steps or int(SUBSTRATES[substrate].config["total_timesteps"])


@dataclass
class Diagnosis:
    component: str
    mechanism: str
    file: str | None = None
    start_line: int | None = None
    end_line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class EpisodeRecord:
    """What an episode produced, for the scorer: the tool-loop episode, the diagnosis and
    the workspace's files at the start and at the end."""

    bug: Bug
    arm: str
    seed: int
    episode: Episode
    diagnosis: Diagnosis | None
    start_files: dict[str, str]
    final_files: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)


def episode_files(bug: Bug) -> dict[str, str]:
    """The broken substrate package an episode's workspace holds (paths inside the package)."""
    return workspace_files(bug.substrate, broken_files(bug))


def read_tree(workspace: Path) -> dict[str, str]:
    """Every file of the workspace (bytecode and files outside the package included, so an
    added file of any kind shows in the integrity check), keyed relative to the package:
    a file beside the package is ``../name``. The transient run directory is left out."""
    root = workspace / PACKAGE
    out = {}
    for p in sorted(workspace.rglob("*")):
        rel = p.relative_to(workspace)
        if p.is_file() and rel.parts[0] != RUN_DIR:
            key = (
                rel.relative_to(PACKAGE).as_posix()
                if p.is_relative_to(root)
                else "../" + rel.as_posix()
            )
            out[key] = p.read_bytes().decode("utf-8", errors="replace")
    return out


SYSTEM = (
    "You are an engineer debugging reinforcement-learning training code. A PPO training run "
    "finishes without errors but the policy learns less than it should: there is one silent "
    "bug. Investigate through the tools, then call submit_diagnosis exactly once."
)


def prompt(bug: Bug, arm: str, budget: EpisodeBudget) -> str:
    sub = SUBSTRATES[bug.substrate]
    steps = budget.steps_for(bug.substrate)
    tools = arms.get(arm).tools
    lines = [
        f"Symptom: {bug.symptom}",
        "",
        f"Setup: {sub.description}. The code is the Python package `{PACKAGE}/` in the "
        f"workspace (entry module `{PACKAGE}.{sub.entry}`).",
        f"Tools: {tools}.",
        f"Compute budget: at most {budget.max_runs} training runs of at most {steps} "
        f"environment steps each; {budget.max_turns} turns in all. run_training takes config "
        "overrides (the entry's config field names) and a seed.",
        "",
        "Component taxonomy (submit_diagnosis takes exactly one of these):",
        "  " + ", ".join(TAXONOMY),
    ]
    if arms.get(arm).files:
        lines += [
            "",
            "Fix the bug by editing the algorithm code; your final workspace is scored by "
            "re-training it on fresh seeds. Do not edit "
            + ", ".join(f"`{PACKAGE}/{p}`" for p in PROTECTED)
            + " (environments, budgets, seeds): an edit there invalidates the episode. "
            "Then call submit_diagnosis with the component, the file and line range of the "
            "bug, and the mechanism in words.",
        ]
    else:
        lines += ["", "Call submit_diagnosis with the component and the mechanism in words."]
    return "\n".join(lines)


# ---- tool arguments ---------------------------------------------------------------------


class RunTrainingArgs(ToolArgs):
    overrides: dict[str, float | int | bool | str] = Field(
        default_factory=dict, description='Config fields to override, e.g. {"lr": 0.001}.'
    )
    total_timesteps: int | None = Field(None, ge=1, description="Steps for this run.")
    seed: int | None = Field(None, description="Seed for this run (default: the episode's).")


class MetricKeysArgs(ToolArgs):
    run: int = Field(ge=1, description="Run number (as returned by run_training).")


class GetMetricsArgs(ToolArgs):
    run: int = Field(ge=1, description="Run number.")
    key: str = Field(description="A metric key from list_metric_keys.")
    start_step: int | None = Field(None, ge=0, description="Only points at or after this step.")
    end_step: int | None = Field(None, ge=0, description="Only points at or before this step.")
    max_points: int = Field(50, ge=1, le=500, description="Downsample to at most this many.")


class PlotArgs(ToolArgs):
    runs: list[int] = Field(min_length=1, max_length=6, description="Run numbers to overlay.")
    keys: list[str] = Field(min_length=1, max_length=4, description="Metric keys, one panel each.")


class DiagnoseArgs(ToolArgs):
    component: str = Field(description="One component from the taxonomy in the task.")
    mechanism: str = Field(min_length=1, description="What is wrong and why it hurts learning.")
    file: str = Field(description="File with the bug, e.g. substrates/ppo_single.py.")
    start_line: int = Field(ge=1, description="First line of the bug (current file).")
    end_line: int = Field(ge=1, description="Last line of the bug (current file).")


class DiagnoseOnlyArgs(ToolArgs):
    component: str = Field(description="One component from the taxonomy in the task.")
    mechanism: str = Field(min_length=1, description="What is wrong and why it hurts learning.")


# ---- metrics -----------------------------------------------------------------------------


def metric_series(records: list[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    """(global_step, value) points of one metric: ``episode_return``/``episode_length`` from
    the episode lines, anything else from the iteration lines."""
    if key in ("episode_return", "episode_length"):
        field_ = "return" if key == "episode_return" else "length"
        return [
            (int(r["global_step"]), float(r[field_])) for r in records if r.get("kind") == "episode"
        ]
    return [
        (int(r["global_step"]), float(r[key]))
        for r in records
        if r.get("kind") == "iteration"
        and isinstance(r.get(key), int | float)
        and not isinstance(r.get(key), bool)
    ]


def metric_keys(records: list[dict[str, Any]]) -> list[str]:
    keys = {
        k
        for r in records
        if r.get("kind") == "iteration"
        for k, v in r.items()
        if k not in ("kind", "iteration", "global_step")
        and isinstance(v, int | float)
        and not isinstance(v, bool)
    }
    return ["episode_return", "episode_length", *sorted(keys)]


def downsample(points: list[tuple[int, float]], n: int) -> list[tuple[int, float]]:
    """At most ``n`` points, evenly spaced by index, first and last kept."""
    if len(points) <= n:
        return points
    if n == 1:
        return [points[-1]]
    idx = sorted({round(i * (len(points) - 1) / (n - 1)) for i in range(n)})
    return [points[i] for i in idx]


def plot_png(series: dict[str, dict[int, list[tuple[int, float]]]], path: Path) -> Path:
    """One panel per metric, one line per run, written as PNG with matplotlib (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(series), 1, figsize=(7, 2.4 * len(series)), squeeze=False)
    for ax, (key, runs) in zip(axes[:, 0], series.items(), strict=True):
        for run, pts in runs.items():
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"run {run}", lw=1)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("global step", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=80)
    plt.close(fig)
    return path


# ---- the episode -------------------------------------------------------------------------


class BugEpisode:
    """The workspace, sandbox and tools of one episode, and what the agent submitted."""

    def __init__(
        self,
        bug: Bug,
        arm: str,
        seed: int,
        episode_dir: Path,
        budget: EpisodeBudget = EpisodeBudget(),
        backend: str = "bwrap",
    ) -> None:
        self.arm_spec = arms.get(arm)  # unknown arm: ConfigError naming the choices
        self.bug, self.arm, self.seed, self.budget = bug, arm, seed, budget
        self.dir = Path(episode_dir)
        if (self.dir / "workspace").exists():
            shutil.rmtree(self.dir / "workspace")  # a half-finished earlier attempt
        self.start_files = episode_files(bug)
        self.workspace = write_workspace(self.start_files, self.dir / "workspace")
        self.runs_dir, self.plots_dir = self.dir / "runs", self.dir / "plots"
        shutil.rmtree(self.runs_dir, ignore_errors=True)
        shutil.rmtree(self.plots_dir, ignore_errors=True)
        self.box: Sandbox = make_sandbox(
            self.workspace,
            backend=backend,
            ro_binds=[Path(p) for p in library_paths()],
            limits=Limits(wall_s=budget.run_timeout_s, memory_mb=8192),
        )
        self.runs: list[dict[str, Any]] = []
        self.diagnosis: Diagnosis | None = None
        self.plots = 0

    # -- run_training
    def run_training(self, a: RunTrainingArgs) -> str:
        if len(self.runs) >= self.budget.max_runs:
            raise ToolError(
                f"compute budget used up: {self.budget.max_runs} of "
                f"{self.budget.max_runs} training runs spent"
            )
        sub = SUBSTRATES[self.bug.substrate]
        limit = self.budget.steps_for(self.bug.substrate)
        steps = a.total_timesteps or limit
        if steps > limit:
            raise ToolError(f"total_timesteps {steps} is over the budget of {limit} per run")
        for k in ("seed", "total_timesteps"):
            if k in a.overrides:
                raise ToolError(f"set {k!r} with the run_training argument, not in overrides")
        config = {
            **sub.config,
            **a.overrides,
            "total_timesteps": steps,
            "seed": self.seed if a.seed is None else a.seed,
        }
        n = len(self.runs) + 1
        self.runs.append({"run": n, "config": config})
        inside = self.workspace / RUN_DIR
        shutil.rmtree(inside, ignore_errors=True)
        self.box.write_file(f"{RUN_DIR}/config.json", json.dumps(config))
        libs = ":".join(library_paths())
        result = self.box.exec(
            [
                "python",
                "-I",
                "-B",
                "-c",
                BOOT,
                libs,
                ".",
                sub.entry,
                "--config",
                f"{RUN_DIR}/config.json",
                "--run-dir",
                f"{RUN_DIR}/out",
            ],
            timeout=command_timeout(self.budget.run_timeout_s),
            env=training_env(),
        )
        dest = self.runs_dir / f"run{n}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if inside.exists():
            shutil.move(str(inside), dest)
        else:
            dest.mkdir()
        (dest / "stdout.txt").write_text(result.stdout + result.stderr)
        metrics = dest / "out" / "metrics.jsonl"
        records = read_jsonl(metrics) if metrics.is_file() else []
        self.runs[-1].update(
            returncode=result.returncode, timed_out=result.timed_out, wall_s=round(result.wall_s, 2)
        )
        tail = (result.stdout + result.stderr)[-2000:]
        if not result.ok:
            why = "timed out" if result.timed_out else f"exit code {result.returncode}"
            raise ToolError(
                f"run {n} crashed ({why}) after {result.wall_s:.1f}s; output tail:\n{tail}"
            )
        score, n_eps = score_episodes(records, steps)
        episodes = [r for r in records if r.get("kind") == "episode"]
        last = ", ".join(f"{r['return']:.1f}" for r in episodes[-10:])
        return (
            f"run {n} finished in {result.wall_s:.1f}s ({steps} steps, seed "
            f"{config['seed']}). {len(episodes)} episodes; mean return of the {n_eps} "
            f"episodes ending in the last {LAST_FRACTION:.0%} of steps: {score:.2f}; last "
            f"10 returns: {last or '-'}\n--- output tail ---\n{tail}"
        )

    def _records(self, run: int) -> list[dict[str, Any]]:
        if not 1 <= run <= len(self.runs):
            raise ToolError(f"no run {run}; runs so far: {len(self.runs)}")
        path = self.runs_dir / f"run{run}" / "out" / "metrics.jsonl"
        if not path.is_file():
            raise ToolError(f"run {run} wrote no metrics (it crashed)")
        return read_jsonl(path)

    def list_metric_keys(self, a: MetricKeysArgs) -> str:
        records = self._records(a.run)
        rows = []
        for key in metric_keys(records):
            pts = metric_series(records, key)
            span = f"steps {pts[0][0]}..{pts[-1][0]}" if pts else "no points"
            rows.append(f"{key}: {len(pts)} points, {span}")
        return "\n".join(rows)

    def get_metrics(self, a: GetMetricsArgs) -> str:
        records = self._records(a.run)
        if a.key not in metric_keys(records):
            raise ToolError(f"unknown metric {a.key!r}; known: {', '.join(metric_keys(records))}")
        pts = [
            p
            for p in metric_series(records, a.key)
            if (a.start_step is None or p[0] >= a.start_step)
            and (a.end_step is None or p[0] <= a.end_step)
        ]
        shown = downsample(pts, a.max_points)
        head = f"{a.key}, run {a.run}: {len(shown)} of {len(pts)} points (global_step value)"
        return head + "\n" + "\n".join(f"{s} {v:.6g}" for s, v in shown)

    def plot_metrics(self, a: PlotArgs) -> ToolOutput:
        series: dict[str, dict[int, list[tuple[int, float]]]] = {}
        for run in a.runs:
            records = self._records(run)
            for key in a.keys:
                if key not in metric_keys(records):
                    raise ToolError(
                        f"unknown metric {key!r}; known: {', '.join(metric_keys(records))}"
                    )
                series.setdefault(key, {})[run] = metric_series(records, key)
        self.plots += 1
        path = plot_png(series, self.plots_dir / f"plot{self.plots}.png")
        # the image's own name only: the host path names the episode's directory
        return ToolOutput(
            f"plotted {', '.join(a.keys)} for runs {a.runs}: {path.name}", (str(path),)
        )

    def submit(self, a: DiagnoseArgs | DiagnoseOnlyArgs) -> str:
        if a.component not in TAXONOMY:
            raise ToolError(
                f"component {a.component!r} is not in the taxonomy; choose one of: "
                + ", ".join(TAXONOMY)
            )
        if isinstance(a, DiagnoseArgs):
            if a.end_line < a.start_line:
                raise ToolError(f"end_line {a.end_line} is before start_line {a.start_line}")
            rel = a.file.removeprefix("./").removeprefix(f"{PACKAGE}/")
            if not (self.workspace / PACKAGE / rel).is_file():
                raise ToolError(
                    f"{a.file!r} is not a file of the workspace package "
                    f"(give e.g. {PACKAGE}/{self.bug.file})"
                )
            self.diagnosis = Diagnosis(a.component, a.mechanism, rel, a.start_line, a.end_line)
        else:
            self.diagnosis = Diagnosis(a.component, a.mechanism)
        return "diagnosis submitted"

    def tools(self) -> list[Tool]:
        out: list[Tool] = []
        arm = self.arm_spec
        if arm.files:
            keep = ("list_files", "read_file", "edit_file", "write_file")
            out += [t for t in standard_tools(self.box) if t.name in keep]
        if arm.run:
            out.append(
                Tool(
                    "run_training",
                    "Train the workspace's code in the sandbox with "
                    "config overrides; counts against the compute budget.",
                    RunTrainingArgs,
                    self.run_training,
                )
            )
        if arm.metrics:
            out.append(
                Tool(
                    "list_metric_keys",
                    "The metrics a run logged, with point counts and step ranges.",
                    MetricKeysArgs,
                    self.list_metric_keys,
                )
            )
            out.append(
                Tool(
                    "get_metrics",
                    "One metric of a run as (global_step, value) "
                    "points, optionally a step range, downsampled.",
                    GetMetricsArgs,
                    self.get_metrics,
                )
            )
        if arm.plots:
            out.append(
                Tool(
                    "plot_metrics",
                    "Plot metrics of one or more runs; returns a PNG image.",
                    PlotArgs,
                    self.plot_metrics,
                )
            )
        args = DiagnoseArgs if arm.files else DiagnoseOnlyArgs
        out.append(
            Tool(
                "submit_diagnosis",
                "Finish: name the buggy component (from the "
                "taxonomy), the mechanism"
                + (", and the file and lines" if arm.files else "")
                + ".",
                args,
                self.submit,
                "submit",
            )
        )
        return out

    def run(self, client: ModelClient) -> EpisodeRecord:
        budget = Budget(
            max_turns=self.budget.max_turns,
            wall_s=self.budget.wall_s,
            command_timeout_s=self.budget.run_timeout_s,
        )
        ep = run_tool_loop(
            client, self.tools(), SYSTEM, prompt(self.bug, self.arm, self.budget), budget
        )
        return self.record(ep)

    def record(self, episode: Episode) -> EpisodeRecord:
        """What the scorer takes: ``episode`` (the tool loop's record, however it was driven:
        here by ``run``, or step by step over HTTP) with the workspace as it is now."""
        return EpisodeRecord(
            self.bug,
            self.arm,
            self.seed,
            episode,
            self.diagnosis,
            dict(self.start_files),
            read_tree(self.workspace),
            list(self.runs),
        )
