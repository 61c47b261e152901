"""The eval runner and its analysis.

``run_eval`` plays every (bug, arm, episode seed) for one agent into a run directory:
``config.json`` (what the run is), and per episode ``episodes/<bug>__<arm>__s<seed>/`` with
``transcript.json``, ``diff.patch`` (the workspace's final diff), ``result.json`` (the
verdict; its presence marks the episode done, so a rerun resumes where it stopped).

``analyze`` groups verdicts by agent x arm x bug class: mean, standard error (sample std /
sqrt(n)) and n of each score, and calls a difference between two arms reliable only when it
exceeds two standard errors of the difference (seed 003's statistics discipline).
"""

from __future__ import annotations

import difflib
import hashlib
import hmac
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verigap.agents import ModelClient
from verigap.errors import ConfigError
from verigap.runs import write_json_atomic
from verigap.silentbug import arms as arm_registry
from verigap.silentbug.bank import Bug, Registry, load_registry
from verigap.silentbug.calibrate import read_baselines
from verigap.silentbug.episode import TAXONOMY, BugEpisode, EpisodeBudget
from verigap.silentbug.scoring import ScoringSetup, default_workers, drawn_setup, new_secret, score
from verigap.silentbug.scripted import AGENTS, scripted_client
from verigap.silentbug.substrate import pristine_files
from verigap.verdict import Verdict

PROVIDERS = ("scripted", "openai", "anthropic", "local")
METRICS = (
    "reward",
    "outcome",
    "localized",
    "component_strict",
    "component_set",
    "correct",
    "invalid",
    "hacked",
)


def parse_agent(spec: str) -> tuple[str, str]:
    """``scripted:NAME``, ``openai:MODEL``, ``anthropic:MODEL`` or ``local:WEIGHTS``."""
    provider, _, name = spec.partition(":")
    if provider not in PROVIDERS or not name:
        raise ConfigError(
            f"unknown agent {spec!r}; use scripted:NAME ({', '.join(AGENTS)}), "
            "openai:MODEL, anthropic:MODEL or local:smollm2"
        )
    if provider == "scripted" and name not in AGENTS:
        raise ConfigError(f"unknown scripted agent {name!r}; choose from {', '.join(AGENTS)}")
    return provider, name


def parse_arms(spec: str) -> list[str]:
    """Validated arm names from ``"A,B,C,D"`` (the arm registry's parser)."""
    return arm_registry.parse_arms(spec)


def accepted_ids(baselines: Path | None = None) -> list[str]:
    try:
        return list(read_baselines(baselines)["summary"]["accepted_ids"])
    except KeyError as e:
        raise ConfigError(f"calibration file has no {e}; rerun calibrate") from None


def resolve_bugs(spec: str, registry: Registry | None = None) -> list[Bug]:
    """``accepted`` (the calibrated set) or comma-separated bug ids."""
    registry = registry or load_registry()
    ids = (
        accepted_ids() if spec == "accepted" else [s.strip() for s in spec.split(",") if s.strip()]
    )
    if not ids:
        raise ConfigError("no bugs given; pass --bugs accepted or bug ids")
    return [registry.get(i) for i in ids]


def calibration_seeds(baselines: Path | None = None) -> tuple[int, ...]:
    return tuple(read_baselines(baselines)["seeds"])


@dataclass(frozen=True)
class EvalConfig:
    agent: str
    arms: tuple[str, ...]
    bugs: tuple[str, ...]
    episodes: int = 1
    max_runs: int = 4
    max_steps: int | None = None
    max_turns: int = 30
    score_seeds: tuple[int, ...] | None = None
    """training seeds of the scored runs; None: drawn from the run directory's scoring secret"""
    score_steps: int | None = None
    """scoring budget override (None: each substrate's calibration budget)"""
    scheme: str = "outcome"
    base_url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def budget(self) -> EpisodeBudget:
        return EpisodeBudget(
            max_runs=self.max_runs, max_steps=self.max_steps, max_turns=self.max_turns
        )


def make_client(cfg: EvalConfig, bug: Bug, arm: str, seed: int) -> ModelClient:
    provider, name = parse_agent(cfg.agent)
    if provider == "scripted":
        return scripted_client(name, bug, arm, seed, cfg.budget)
    from verigap.agents import client_from_spec

    return client_from_spec(cfg.agent, base_url=cfg.base_url, temperature=0.0, seed=seed)


def check_run_dir(run_dir: Path, cfg: EvalConfig) -> None:
    path = run_dir / "config.json"
    if not path.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, cfg.to_dict())
        return
    try:
        old = json.loads(path.read_text())
    except ValueError as e:
        raise ConfigError(
            f"{path}: corrupt run dir (config.json is not JSON: {e}); remove it or use a new --out"
        ) from None
    if old != json.loads(json.dumps(cfg.to_dict())):
        raise ConfigError(
            f"{run_dir} holds a different eval ({path}); use a new --out to "
            "change the agent, arms, bugs, budgets or scoring"
        )


def episode_name(bug_id: str, arm: str, seed: int, key: str = "") -> str:
    """The episode's directory name: opaque in the bug (a keyed hash), so no path an agent
    might see names the bug it is diagnosing."""
    tag = hmac.new(key.encode(), bug_id.encode(), hashlib.sha256).hexdigest()[:16]
    return f"{tag}__{arm}__s{seed}"


def _diff(start: dict[str, str], final: dict[str, str]) -> str:
    out = []
    for rel in sorted(set(start) | set(final)):
        a, b = start.get(rel, ""), final.get(rel, "")
        if a != b:
            out += difflib.unified_diff(
                a.splitlines(True), b.splitlines(True), f"a/{rel}", f"b/{rel}"
            )
    return "".join(out)


SECRET_FILE = "scoring_secret"
"""in the run directory, never in a workspace: the root of the scoring seeds"""


def scoring_secret(run_dir: Path, given: str | None = None) -> str:
    """The run directory's scoring secret: the one it holds, else ``given``, else a fresh one
    (written beside config.json, readable by its owner only, so a resumed eval scores alike)."""
    path = run_dir / SECRET_FILE
    if path.is_file():
        held = path.read_text().strip()
        if given and given != held:
            raise ConfigError(
                f"{run_dir} was scored with another secret; drop --secret or use a new --out"
            )
        return held
    secret = given or new_secret()
    run_dir.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(secret + "\n")
    return secret


def run_eval(
    run_dir: Path,
    cfg: EvalConfig,
    *,
    cache_dir: Path = Path("runs/silentbug/scoring"),
    backend: str = "bwrap",
    client_factory: Callable[..., ModelClient] | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    workers: int | None = None,
    secret: str | None = None,
) -> list[dict[str, Any]]:
    """Play and score every episode not yet done in ``run_dir``; return all results.

    ``workers``: scored runs trained at once (default: half the cores). ``secret``: the root of
    the scoring seeds when ``cfg.score_seeds`` is None (default: the run directory's, or new)."""
    parse_agent(cfg.agent)
    for a in cfg.arms:
        parse_arms(a)
    registry = load_registry()
    bugs = [registry.get(b) for b in cfg.bugs]
    check_run_dir(run_dir, cfg)
    overrides = (("total_timesteps", cfg.score_steps),) if cfg.score_steps else ()
    common = {
        "overrides": overrides,
        "cache_dir": cache_dir,
        "backend": backend,
        "workers": workers or default_workers(),
    }
    key = scoring_secret(run_dir, secret)  # the scoring seeds' root, and the episode ids' key
    setup = (
        drawn_setup(key, **common)
        if cfg.score_seeds is None
        else ScoringSetup(seeds=cfg.score_seeds, **common)
    )
    pristine = pristine_files()
    factory = client_factory or make_client
    results = []
    for bug in bugs:
        for arm in cfg.arms:
            for seed in range(1, cfg.episodes + 1):
                ep_dir = run_dir / "episodes" / episode_name(bug.id, arm, seed, key)
                done = ep_dir / "result.json"
                if done.is_file():
                    results.append(load_episode(done))
                    if on_done:
                        on_done(results[-1])
                    continue
                started = time.time()
                episode = BugEpisode(bug, arm, seed, ep_dir, cfg.budget, backend=backend)
                record = episode.run(factory(cfg, bug, arm, seed))
                write_json_atomic(ep_dir / "transcript.json", record.episode.to_dict())
                (ep_dir / "diff.patch").write_text(_diff(record.start_files, record.final_files))
                verdict = score(record, setup, pristine, cfg.scheme)
                result = {
                    "agent": cfg.agent,
                    "bug": bug.id,
                    "arm": arm,
                    "seed": seed,
                    "class": bug.bug_class,
                    "substrate": bug.substrate,
                    "split": bug.split,
                    "runs": record.runs,
                    "wall_s": round(time.time() - started, 2),
                    "verdict": verdict.to_dict(),
                }
                result = json.loads(json.dumps(result))  # as it reads back: lists, not tuples
                write_json_atomic(done, result)
                results.append(result)
                if on_done:
                    on_done(result)
    return results


def load_episode(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        Verdict.from_dict(data["verdict"])
        for k in ("agent", "bug", "arm", "seed", "class"):
            data[k]  # noqa: B018 - presence check
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"{path}: corrupt episode result ({type(e).__name__}: {e}); delete "
            "that episode's directory and rerun eval to redo it"
        ) from None
    return data


def eval_command(run_dir: Path) -> str:
    """The ``verigap silentbug eval`` command line that plays ``run_dir``'s eval (from its
    ``config.json``)."""
    c = json.loads((run_dir / "config.json").read_text())
    parts = [
        f"verigap silentbug eval --agent {c['agent']} --arm {','.join(c['arms'])}",
        f"--bugs {','.join(c['bugs'])} --episodes {c['episodes']}",
        f"--max-runs {c['max_runs']} --max-turns {c['max_turns']}",
        f"--score-seeds {','.join(map(str, c['score_seeds'] or [])) or 'secret'} "
        f"--scheme {c['scheme']}",
    ]
    for flag, key in (
        ("--max-steps", "max_steps"),
        ("--score-steps", "score_steps"),
        ("--base-url", "base_url"),
    ):
        if c.get(key) is not None:
            parts.append(f"{flag} {c[key]}")
    return " ".join([*parts, f"--out {run_dir}"])


def load_run(run_dir: Path) -> list[dict[str, Any]]:
    """Every finished episode of a run directory (config.json must be there and valid)."""
    cfg = run_dir / "config.json"
    if not cfg.is_file():
        raise ConfigError(
            f"{run_dir}: not an eval run dir (no config.json); "
            "pass a directory `verigap silentbug eval` wrote"
        )
    try:
        json.loads(cfg.read_text())
    except ValueError as e:
        raise ConfigError(f"{cfg}: corrupt run dir (config.json is not JSON: {e})") from None
    return [load_episode(p) for p in sorted(run_dir.glob("episodes/*/result.json"))]


# ---- analysis -----------------------------------------------------------------------------


def episode_scores(result: dict[str, Any]) -> dict[str, float | None]:
    """The numbers one episode contributes (None where the arm has no such score)."""
    v = result["verdict"]
    checks, status = v["checks"], v["status"]
    has_fix = arm_registry.get(result["arm"]).files
    return {
        "reward": float(v["reward"]),
        "outcome": float(checks["outcome"])
        if "outcome" in checks
        else (0.0 if has_fix and status != "OK" else None),
        "localized": float(bool(checks.get("localized"))) if has_fix else None,
        "component_strict": float(bool(checks.get("component_strict"))),
        "component_set": float(bool(checks.get("component_set"))),
        "correct": float(bool(v["correct"])),
        "invalid": float(status == "INVALID"),
        "hacked": float(bool(v["hacks"])),
    }


def mean_se(values: Sequence[float]) -> dict[str, Any]:
    """Mean, standard error of the mean (ddof=1; None with one value) and n."""
    n = len(values)
    if n == 0:
        return {"mean": None, "se": None, "n": 0}
    se = float(np.std(values, ddof=1) / math.sqrt(n)) if n > 1 else None
    return {"mean": float(np.mean(values)), "se": se, "n": n}


def constant_baselines(bugs: Sequence[Bug]) -> dict[str, Any]:
    """What a diagnosis that ignores its evidence scores on ``bugs`` (one episode each): the
    best constant answer (the component that is right most often, strict and in the acceptable
    set) and chance (a uniformly random component). Arm D is a measure only above these."""
    if not bugs:
        return {"n": 0}
    n = len(bugs)
    sets = [{b.component, *b.acceptable_components} for b in bugs]
    strict = {c: sum(b.component == c for b in bugs) / n for c in TAXONOMY}
    in_set = {c: sum(c in s for s in sets) / n for c in TAXONOMY}
    best = max(TAXONOMY, key=lambda c: (strict[c], in_set[c]))
    best_set = max(TAXONOMY, key=lambda c: (in_set[c], strict[c]))
    return {
        "n": n,
        "best_constant_strict": {"component": best, "score": strict[best]},
        "best_constant_set": {"component": best_set, "score": in_set[best_set]},
        "chance_strict": 1 / len(TAXONOMY),
        "chance_set": float(np.mean([len(s) for s in sets])) / len(TAXONOMY),
    }


def split_baselines(bugs: Sequence[Bug]) -> dict[str, Any]:
    """``constant_baselines`` of each split of ``bugs`` (the accepted set, say)."""
    return {
        s: constant_baselines([b for b in bugs if b.split == s])
        for s in sorted({b.split for b in bugs})
    }


def analyze(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per agent x arm x bug class (and per agent x arm over all classes): each metric's
    mean, SE and n; and arm-vs-arm differences with their reliability (> 2 SE)."""
    groups: dict[tuple[str, str, str], list[dict[str, float | None]]] = defaultdict(list)
    for r in results:
        s = episode_scores(r)
        groups[(r["agent"], r["arm"], r["class"])].append(s)
        groups[(r["agent"], r["arm"], "all")].append(s)
    rows = []
    for (agent, arm, cls), scores in sorted(groups.items()):
        row: dict[str, Any] = {"agent": agent, "arm": arm, "class": cls, "n": len(scores)}
        for m in METRICS:
            vals = [s[m] for s in scores if s[m] is not None]
            row[m] = mean_se(vals)
        rows.append(row)
    comparisons = []
    overall = {(r["agent"], r["arm"]): r for r in rows if r["class"] == "all"}
    for (agent, arm_a), ra in sorted(overall.items()):
        for (agent_b, arm_b), rb in sorted(overall.items()):
            if agent_b != agent or arm_b <= arm_a:
                continue
            for m in ("reward", "component_strict", "component_set"):
                a, b = ra[m], rb[m]
                if a["n"] < 2 or b["n"] < 2:
                    continue
                diff = b["mean"] - a["mean"]
                se = math.sqrt(a["se"] ** 2 + b["se"] ** 2)
                comparisons.append(
                    {
                        "agent": agent,
                        "metric": m,
                        "arms": f"{arm_b}-{arm_a}",
                        "difference": diff,
                        "se": se,
                        "reliable": bool(abs(diff) > 2 * se),
                    }
                )
    # arm D against what needs no evidence, on the bugs each agent was given
    registry = load_registry()
    diagnosis_only = []
    d = arm_registry.D.name
    for agent in sorted({r["agent"] for r in results if r["arm"] == d}):
        known = {b.id for b in registry.bugs}
        eps = [r for r in results if r["agent"] == agent and r["arm"] == d and r["bug"] in known]
        if not eps:  # bugs the registry no longer holds: nothing to set beside
            continue
        base = constant_baselines([registry.get(r["bug"]) for r in eps])
        got = overall[(agent, d)]
        diagnosis_only.append(
            {
                "agent": agent,
                **base,
                "strict": got["component_strict"]["mean"],
                "set": got["component_set"]["mean"],
                "strict_above_constant": got["component_strict"]["mean"]
                - base["best_constant_strict"]["score"],
                "set_above_constant": got["component_set"]["mean"]
                - base["best_constant_set"]["score"],
            }
        )
    accepted = [registry.get(i) for i in accepted_ids()]
    return {
        "rows": rows,
        "comparisons": comparisons,
        "episodes": len(results),
        "diagnosis_only": diagnosis_only,
        "split_baselines": split_baselines(accepted),
    }


def summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per agent over every episode: episodes, mean and largest reward, share correct and
    share INVALID; and wall seconds (each episode's own, summed; a run cached by an earlier
    episode counts once, in that episode)."""
    agents: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        agents[r["agent"].removeprefix("scripted:")].append(r)
    by_agent = {
        a: {
            "episodes": len(rs),
            "mean_reward": float(np.mean([r["verdict"]["reward"] for r in rs])),
            "max_reward": float(max(r["verdict"]["reward"] for r in rs)),
            "correct": float(np.mean([bool(r["verdict"]["correct"]) for r in rs])),
            "invalid": float(np.mean([r["verdict"]["status"] == "INVALID" for r in rs])),
            "bugs": len({r["bug"] for r in rs}),
        }
        for a, rs in sorted(agents.items())
    }
    wall = {a: round(sum(float(r["wall_s"]) for r in rs), 1) for a, rs in sorted(agents.items())}
    return {
        "summary": by_agent,
        "wall_s": {"total": round(sum(wall.values()), 1), "by_agent": wall},
    }


def _cell(x: dict[str, Any]) -> str:
    if x["mean"] is None:
        return "-"
    return f"{x['mean']:.3f}" + (f" ± {x['se']:.3f}" if x["se"] is not None else "")


def markdown(analysis: dict[str, Any]) -> str:
    """The analysis as a Markdown table (mean ± SE, n per row)."""
    cols = (
        "reward",
        "outcome",
        "localized",
        "component_strict",
        "component_set",
        "correct",
        "invalid",
        "hacked",
    )
    lines = [
        "| agent | arm | class | n | " + " | ".join(cols) + " |",
        "|---|---|---|---|" + "---|" * len(cols),
    ]
    for r in analysis["rows"]:
        lines.append(
            f"| {r['agent']} | {r['arm']} | {r['class']} | {r['n']} | "
            + " | ".join(_cell(r[c]) for c in cols)
            + " |"
        )
    return "\n".join(lines)


def figure(
    analysis: dict[str, Any],
    path: Path,
    metrics: Sequence[str] = ("reward", "outcome", "component_set"),
) -> Path:
    """Bars of mean ± SE per agent (x) and arm (colour), one panel per metric, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in analysis["rows"] if r["class"] == "all"]
    agents = sorted({r["agent"] for r in rows})
    arms = sorted({r["arm"] for r in rows})
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 3.2), squeeze=False)
    width = 0.8 / max(1, len(arms))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for k, arm in enumerate(arms):
            xs, ys, es = [], [], []
            for i, agent in enumerate(agents):
                row = next((r for r in rows if r["agent"] == agent and r["arm"] == arm), None)
                if row is None or row[metric]["mean"] is None:
                    continue
                xs.append(i + k * width)
                ys.append(row[metric]["mean"])
                es.append(row[metric]["se"] or 0.0)
            ax.bar(xs, ys, width, yerr=es, label=f"arm {arm}", capsize=2)
        ax.set_xticks(
            [i + 0.4 - width / 2 for i in range(len(agents))],
            [a.removeprefix("scripted:") for a in agents],
            rotation=30,
            fontsize=7,
        )
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{metric} (mean ± SE)", fontsize=9)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=90)
    plt.close(fig)
    return path
