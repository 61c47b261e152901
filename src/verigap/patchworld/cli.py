"""`verigap patchworld ...`: look at programs and roll policies out on the held-out set."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from verigap.cli_options import hidden_alias, json_option, renamed
from verigap.errors import ConfigError
from verigap.patchworld import rules
from verigap.patchworld.baselines import SCRIPTED
from verigap.patchworld.env import run_episodes
from verigap.patchworld.programs import generate
from verigap.patchworld.show import program_text
from verigap.results import write_result
from verigap.rewards import parse_scheme
from verigap.verdict import summarize_arrays

app = typer.Typer(help="Patch World: the toy repair task.", no_args_is_help=True)
console = Console()


@app.command()
def show(
    seed: int = typer.Option(0, help="which program (training stream)"),
    k: int = typer.Option(4, help="broken branches"),
    hide: bool = typer.Option(False, help="hide reference values and the pattern"),
) -> None:
    """Print one program as code-like text: branches, broken, tested and strict flags.

    Example: verigap patchworld show --seed 3 --k 4
    """
    try:
        programs = generate(k, 1, seed=seed)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    console.print(program_text(programs, 0, reveal=not hide), highlight=False)


def rollout_summary(policy: str, n: int, k: int, seed: int, reward: str) -> dict:
    """Aggregates of a scripted policy on ``n`` held-out programs (pure library call)."""
    if policy not in SCRIPTED:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(SCRIPTED)}")
    scheme = parse_scheme(reward)
    programs = generate(k, n, seed=0, stream="heldout")
    rng = np.random.default_rng(seed)
    actions = SCRIPTED[policy](programs, rng)
    grades, payout = run_episodes(programs, actions, scheme, rng)
    summary = summarize_arrays(
        grades.passed,
        grades.correct,
        payout.reward,
        audited=payout.audited,
        caught=payout.caught,
        outcome_counts=grades.outcome_counts(),
    )
    counts = grades.outcome_counts()
    return {
        "policy": policy,
        "n": n,
        "k": k,
        "seed": seed,
        "reward": scheme.label,
        "visible_pass": summary.pass_rate,
        "true_success": summary.true_success,
        "false_success": summary.false_success,
        "mean_reward": summary.mean_reward,
        "outcomes": {
            where: {
                o: counts[f"{where}/{o}"]
                / max(1, sum(counts[f"{where}/{x}"] for x in rules.OUTCOMES))
                for o in rules.OUTCOMES
            }
            for where in ("tested", "untested")
        },
    }


@app.command()
def rollout(
    policy: str = typer.Option("careless", help=f"one of {', '.join(SCRIPTED)}"),
    n: int = typer.Option(2000, help="held-out programs"),
    k: int = typer.Option(4, help="broken branches per program"),
    seed: int = typer.Option(0, help="policy / audit randomness"),
    reward: str = typer.Option("visible", help="visible | oracle | deletion[:C] | audit:RATE"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    save: Path | None = typer.Option(
        None,
        help="also write the summary as a results file (e.g. results/patchworld/careless.json)",
    ),
) -> None:
    """Roll a policy out on held-out programs and print visible pass, true and false success,
    and the outcome of every broken branch by tested / untested.

    Example: verigap patchworld rollout --policy careless --n 2000 --reward audit:0.25
    """
    try:
        s = rollout_summary(policy, n, k, seed, reward)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if save is not None:
        write_result(
            save,
            s,
            command=f"verigap patchworld rollout --policy {policy} --n {n} "
            f"--k {k} --seed {seed} --reward {reward} --save {save}",
        )
    if as_json:
        print(json.dumps(s, indent=2))
        return
    t = Table(title=f"{policy} on {n} held-out programs, k={k}, reward={s['reward']}", min_width=60)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for key in ("visible_pass", "true_success", "false_success", "mean_reward"):
        t.add_row(key.replace("_", " "), f"{s[key]:.3f}")
    console.print(t)
    m = Table(title="outcome of broken branches (share of each group)")
    m.add_column("branch")
    for o in rules.OUTCOMES:
        m.add_column(o, justify="right")
    for where in ("tested", "untested"):
        m.add_row(where, *[f"{s['outcomes'][where][o]:.3f}" for o in rules.OUTCOMES])
    console.print(m)


def pilot(
    out: Path = typer.Option(Path("runs/pilot"), help="runs directory (resumable)"),
    quick: bool = typer.Option(False, help="a ~1 minute smoke version (1 seed, 100 steps)"),
    long: bool = typer.Option(False, help="the 5000-step follow-up: 25% audits and visible"),
    executor: str = typer.Option("process", help="serial | process | ray"),
    workers: int = typer.Option(0, help="process-pool size (0: all cores)"),
    report: bool = typer.Option(True, help="build the report at the end"),
    save: Path | None = typer.Option(
        None,
        "--save",
        help="results file to write (default: "
        "results/patchworld/pilot.json, pilot_long.json with --long; none with --quick)",
    ),
    results: Path | None = hidden_alias("--results", "--save"),
    as_json: bool = json_option(),
) -> None:
    """The Patch World pilot sweep: 14 settings x 3 seeds of SFT + GRPO, then the report.

    Example: verigap pilot --quick   (a one-minute smoke run into runs/pilot-quick)
    """
    from verigap.patchworld.pilot import run_pilot, settings
    from verigap.report import build_report
    from verigap.report.pilot import pilot_results

    if executor not in ("serial", "process", "ray"):
        raise ConfigError(f"--executor {executor!r}: use serial, process or ray")
    results = renamed(save, results, "--save", "--results")
    say = (lambda *a, **k: None) if as_json else console.print
    if quick and out == Path("runs/pilot"):
        out = Path("runs/pilot-quick")
    if results is None and not quick:
        results = Path("results/patchworld") / ("pilot_long.json" if long else "pilot.json")
    t0 = time.perf_counter()
    runs = run_pilot(
        out,
        quick=quick,
        long=long,
        executor=executor,  # type: ignore[arg-type]
        workers=workers or None,
        seeds=(0,) if quick else (0, 1, 2),
    )
    say(f"{len(runs)} runs finished in {out} ({time.perf_counter() - t0:.0f} s this invocation)")
    summary: dict[str, object] = {"runs": len(runs), "out": str(out)}
    data = (
        pilot_results(out, [s.name for s in settings(long)])
        if (results is not None or as_json)
        else {}
    )
    if results is not None:
        command = (
            "make pilot"
            if not (long or quick)
            else "verigap pilot --long"
            if long
            else "verigap pilot --quick"
        )
        summary["results"] = str(write_result(results, data, command=command))
        say(f"results: {summary['results']}")
    if report:
        summary["report"] = str(build_report(out).resolve())
        say(f"report: {summary['report']}")
    if as_json:
        print(json.dumps({**summary, "settings": data["settings"]}, indent=2, default=str))


@app.command()
def probes(
    registry: Path = typer.Option(
        Path("src/verigap/experiments/predictions_transformer.yaml"),
        help="the transformer prediction registry (its settings and seeds)",
    ),
    setting: str = typer.Option("tf_visible", help="the transformer setting to probe"),
    runs: Path = typer.Option(
        Path("runs/experiments-transformer"),
        help="runs directory (resumable; shared with `verigap "
        "experiments run --registry ...` at the same --out)",
    ),
    quick: bool = typer.Option(
        False, help="the registry's small quick runs; results go to RUNS/probes.json"
    ),
    save: Path | None = typer.Option(
        None, "--save", help="results file (default results/patchworld/probes.json)"
    ),
    out: Path | None = hidden_alias("--out", "--save"),
    figure: Path | None = typer.Option(None, help="also draw balanced accuracy by layer"),
    workers: int = typer.Option(0, help="process-pool size (0: all cores)"),
    as_json: bool = json_option(),
) -> None:
    """Linear probes on the transformer policy's hidden states before and after GRPO ("tested",
    "broken", "will delete or stub"), with shuffled-label and control-task baselines, beside the
    transformer-vs-MLP numbers of every setting. Needs the torch extra.

    Example: verigap patchworld probes --quick --runs runs/probes-quick
    """
    from verigap.experiments.registry import load_registry
    from verigap.patchworld.probes import TARGETS
    from verigap.patchworld.probes_report import probe_figure, probe_log

    if runs == Path("runs/experiments-transformer") and quick:
        runs = Path("runs/experiments-transformer-quick")
    out = renamed(save, out, "--save", "--out")
    out = out or (runs / "probes.json" if quick else Path("results/patchworld/probes.json"))
    try:
        reg = load_registry(registry)
        data = probe_log(reg, setting, runs, quick=quick, workers=workers or None)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    cmd = (
        f"verigap patchworld probes --registry {registry} --setting {setting} --runs {runs}"
        + (" --quick" if quick else "")
        + f" --save {out}"
        + (f" --figure {figure}" if figure else "")
    )
    written = write_result(out, data, command=cmd)
    drawn = probe_figure(data, figure) if figure is not None else None
    if as_json:
        print(
            json.dumps(
                {"results": str(written), "figure": drawn and str(drawn), **data},
                indent=2,
                default=str,
            )
        )
        return
    console.print(f"results: {written}")
    if drawn is not None:
        console.print(f"figure: {drawn}")
    t = Table(
        title=f"probes on {setting}, last layer, balanced accuracy on held-out programs "
        f"(mean of {len(data['seeds'])} seeds)"
    )
    for col in ("target", "when", "probe", "shuffled", "control", "input only", "selectivity"):
        t.add_column(col)
    for target in TARGETS:
        for when in ("start", "final"):
            p = data["probes"][when][target]
            t.add_row(
                target,
                when,
                *[
                    f"{p[s]['mean']:.3f}"
                    for s in ("bacc", "shuffled", "control", "input", "selectivity")
                ],
            )
    console.print(t)
