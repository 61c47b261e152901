"""`verigap silentbug ...`: check the bank, ablate, calibrate. Parses, calls, prints."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from verigap.cli_options import hidden_alias, renamed
from verigap.errors import ConfigError
from verigap.silentbug.ablation import ablate as run_ablation
from verigap.silentbug.ablation import markdown_table as ablation_markdown
from verigap.silentbug.bank import check_bug, load_registry
from verigap.silentbug.calibrate import cached_curves, markdown_tables, strict
from verigap.silentbug.calibrate import calibrate as run_calibration
from verigap.silentbug.substrate import SUBSTRATES

if TYPE_CHECKING:
    from verigap.silentbug.evaluate import EvalConfig

app = typer.Typer(
    help="Silent bugs in PPO: bug bank, ablation, calibration, agent eval.", no_args_is_help=True
)
console = Console()

CACHE = typer.Option(Path("runs/silentbug"), help="cache of run directories (keyed by hash)")
WORKERS = typer.Option(None, help="parallel processes (default: all cores)")
JSON = typer.Option(False, "--json", help="print JSON instead of a table")
MARKDOWN = typer.Option(False, "--markdown", help="print Markdown tables instead")


def _f(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.1f}"


@app.command("list")
def list_bugs(as_json: bool = JSON) -> None:
    """The registered bugs and whether each patch applies.

    Example: verigap silentbug list --json
    """
    reg = load_registry()
    rows = [
        {
            "id": b.id,
            "substrate": b.substrate,
            "class": b.bug_class,
            "component": b.component,
            "problems": check_bug(b),
        }
        for b in reg.bugs
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(title=f"bug bank: {len(rows)} bugs")
    for col in ("id", "substrate", "class", "component", "check"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["id"],
            r["substrate"],
            r["class"],
            r["component"],
            "ok" if not r["problems"] else "; ".join(r["problems"]),
        )
    console.print(t)
    if any(r["problems"] for r in rows):
        raise typer.Exit(1)


@app.command()
def ablate(
    substrate: list[str] = typer.Option(["acrobot_modular"], help="substrate(s)"),
    mechanism: list[str] = typer.Option(None, help="mechanism(s); default: all"),
    seeds: int = typer.Option(3, min=2),
    cache_dir: Path = CACHE,
    out: Path = typer.Option(Path("runs/silentbug/ablation.json")),
    workers: int | None = WORKERS,
    as_json: bool = JSON,
    markdown: bool = MARKDOWN,
    merge: bool = typer.Option(
        False,
        "--merge",
        help="keep the rows of an existing "
        "--out file that this call does not ablate (each row "
        "records the invocation that produced it)",
    ),
) -> None:
    """Remove each stability mechanism from the clean code; show which ones hurt.

    Example: verigap silentbug ablate --substrate acrobot_modular --seeds 3
    """
    rows = run_ablation(
        substrate,
        mechanism or None,
        seeds=seeds,
        cache_dir=cache_dir,
        out=out,
        workers=workers,
        progress=not (as_json or markdown),
        merge=merge,
    )
    if as_json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    if markdown:
        print(ablation_markdown(rows))
        return
    t = Table(title=f"ablation over {seeds} seeds (score: mean return, last 20% of steps)")
    for col in ("substrate", "removed", "clean", "ablated", "drop", "3x max std", "load-bearing"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r.substrate,
            r.mechanism,
            f"{_f(r.clean.mean)} ± {_f(r.clean.std)}",
            f"{_f(r.ablated.mean)} ± {_f(r.ablated.std)}",
            _f(r.gap.margin),
            _f(r.gap.threshold),
            "yes" if r.load_bearing else "no",
        )
    console.print(t)
    console.print(f"written: {out}")


@app.command()
def calibrate(
    bug: list[str] = typer.Option(None, "--bug", help="bug id(s); default: all"),
    seeds: int = typer.Option(3, min=2),
    cache_dir: Path = CACHE,
    out: Path = typer.Option(Path("runs/silentbug/baselines.json")),
    workers: int | None = WORKERS,
    as_json: bool = JSON,
    markdown: bool = MARKDOWN,
    merge: bool = typer.Option(
        False,
        "--merge",
        help="keep the bugs of an existing "
        "--out file that this call does not calibrate (each "
        "entry records the invocation that produced it)",
    ),
) -> None:
    """Clean vs broken over seeds; accept bugs whose gap clears 3 x the larger seed std.

    Example: verigap silentbug calibrate --seeds 3 --markdown
    """
    cal = run_calibration(
        bug or None,
        seeds=seeds,
        cache_dir=cache_dir,
        out=out,
        workers=workers,
        progress=not (as_json or markdown),
        merge=merge,
    )
    if as_json:
        print(json.dumps(strict(cal.to_dict()), indent=2))
        return
    if markdown:
        print(markdown_tables(cal))
        return
    t = Table(title=f"calibration over seeds {list(cal.seeds)}")
    for col in ("bug", "substrate", "class", "clean", "broken", "margin", "threshold", "result"):
        t.add_column(col)
    for r in cal.results:
        colour = {"accepted": "green", "rejected": "red", "refused": "yellow"}[r.verdict]
        ran = bool(r.broken.scores)
        t.add_row(
            r.bug.id,
            r.bug.substrate,
            r.bug.bug_class,
            _f(r.clean.mean),
            _f(r.broken.mean) if ran else "not run",
            _f(r.gap.margin) if ran else "-",
            _f(r.gap.threshold) if ran else "-",
            f"[{colour}]{r.verdict}[/{colour}]",
        )
    console.print(t)
    if cal.ablations:
        a = Table(title="ablations behind omission bugs")
        for col in (
            "substrate",
            "removed",
            "clean",
            "ablated",
            "drop",
            "threshold",
            "load-bearing",
        ):
            a.add_column(col)
        for r in cal.ablations:
            a.add_row(
                r.substrate,
                r.mechanism,
                _f(r.clean.mean),
                _f(r.ablated.mean),
                _f(r.gap.margin),
                _f(r.gap.threshold),
                "yes" if r.load_bearing else "no",
            )
        console.print(a)
    console.print(
        f"{len(cal.accepted())}/{len(cal.results)} accepted; "
        f"{cal.runs_executed} of {cal.runs_total} runs executed, the rest cached; "
        f"wall {cal.wall_s:.0f} s; written: {out}"
    )


@app.command()
def curves(
    substrate: list[str] = typer.Option(list(SUBSTRATES), help="substrate(s)"),
    label: str = typer.Option("clean", help="'clean', a bug id or ablate-<mechanism>"),
    seeds: int = typer.Option(3, min=1),
    bins: int = typer.Option(5, min=1),
    cache_dir: Path = CACHE,
    train: bool = typer.Option(False, "--train", help="first run what the cache lacks"),
    workers: int | None = WORKERS,
    out: Path | None = typer.Option(None, help="also write the curves as a results file"),
    as_json: bool = JSON,
) -> None:
    """Learning curves (mean return per slice of the budget) of cached runs (--train: run the
    missing ones first, the same runs calibrate uses).

    Example: verigap silentbug curves --label clean --bins 5
    """
    rows = cached_curves(
        substrate, label, seeds=seeds, bins=bins, cache_dir=cache_dir, train=train, workers=workers
    )
    if out is not None:
        from verigap.results import write_result

        subs = "".join(f" --substrate {s}" for s in substrate)
        write_result(
            out,
            {"label": label, "bins": bins, "seeds": seeds, "rows": strict(rows)},
            command=f"verigap silentbug curves{subs} --label {label} --seeds {seeds} "
            f"--bins {bins}{' --train' if train else ''} --cache-dir {cache_dir}"
            f" --out {out}",
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(title=f"{label}: mean episode return per {100 // bins}% of the steps")
    t.add_column("substrate")
    t.add_column("seed")
    for i in range(bins):
        t.add_column(f"{100 * i // bins}-{100 * (i + 1) // bins}%")
    for r in rows:
        t.add_row(r["substrate"], str(r["seed"]), *(_f(x) for x in r["curve"]))
    console.print(t)


@app.command()
def substrates(as_json: bool = JSON) -> None:
    """The substrates and their fixed calibration budgets.

    Example: verigap silentbug substrates --json
    """
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "entry": s.entry,
                        "config": s.config,
                        "description": s.description,
                        "ablations": sorted(s.ablations),
                    }
                    for s in SUBSTRATES.values()
                ],
                indent=2,
            )
        )
        return
    t = Table(title="substrates")
    for col in ("name", "entry", "config", "ablations"):
        t.add_column(col)
    for s in SUBSTRATES.values():
        t.add_row(s.name, s.entry, json.dumps(s.config), ", ".join(s.ablations) or "-")
    console.print(t)


@app.command("eval")
def eval_(
    agent: str = typer.Option(
        ..., help="scripted:NAME | openai:MODEL | anthropic:MODEL | local:smollm2"
    ),
    arm: str = typer.Option("A,B,C,D", help="comma-separated arms"),
    bugs: str = typer.Option("accepted", help="'accepted' or comma-separated bug ids"),
    episodes: int = typer.Option(1, min=1, help="episode seeds per (bug, arm)"),
    out: Path | None = typer.Option(None, "--out", help="resumable run directory (required)"),
    run_dir: Path | None = hidden_alias("--run-dir", "--out"),
    max_runs: int = typer.Option(4, min=0, help="training runs per episode"),
    max_steps: int | None = typer.Option(
        None, min=1, help="steps per run (default: the substrate's calibration budget)"
    ),
    max_turns: int = typer.Option(30, min=1),
    score_seeds: str = typer.Option(
        "secret",
        help="'secret' (drawn from the run directory's secret), 'calibration' or e.g. 1,2,3",
    ),
    secret: str | None = typer.Option(
        None,
        envvar="VERIGAP_SCORING_SECRET",
        help="root of the drawn scoring seeds (default: the run directory's, or a new one)",
    ),
    workers: int | None = typer.Option(
        None, min=1, help="scored runs trained at once (default: half the cores)"
    ),
    score_steps: int | None = typer.Option(None, min=1, help="scoring budget override"),
    scheme: str = typer.Option("outcome", help="outcome | correct"),
    base_url: str | None = typer.Option(None, help="model server URL"),
    cache_dir: Path = typer.Option(Path("runs/silentbug/scoring")),
    backend: str = typer.Option("bwrap", help="sandbox backend: bwrap | unsafe"),
    as_json: bool = JSON,
) -> None:
    """Put an agent in front of the bug bank: play, score and record every episode.

    Example: verigap silentbug eval --agent scripted:oracle --arm A,B,C,D --out runs/sb/oracle
    """
    from verigap.silentbug import evaluate as ev

    run_dir = renamed(out, run_dir, "--out", "--run-dir")
    if run_dir is None:
        raise ConfigError("--out DIR is required: the resumable run directory of this eval")
    ev.parse_agent(agent)
    arms = ev.parse_arms(arm)
    bug_list = ev.resolve_bugs(bugs)
    if scheme not in ("outcome", "correct"):
        raise ConfigError(f"unknown scheme {scheme!r}; choose outcome or correct")
    seeds = (
        None
        if score_seeds == "secret"
        else ev.calibration_seeds()
        if score_seeds == "calibration"
        else tuple(_ints(score_seeds))
    )
    cfg = ev.EvalConfig(
        agent,
        tuple(arms),
        tuple(b.id for b in bug_list),
        episodes,
        max_runs,
        max_steps,
        max_turns,
        seeds,
        score_steps,
        scheme,
        base_url,
    )
    ev.check_run_dir(run_dir, cfg)  # a bad run dir fails before the progress bar starts
    results = _run_with_progress(
        ev, run_dir, cfg, cache_dir, backend, quiet=as_json, workers=workers, secret=secret
    )
    analysis = ev.analyze(results)
    if as_json:
        print(json.dumps(analysis, indent=2))
        return
    console.print(ev.markdown(analysis))
    console.print(f"{len(results)} episodes in {run_dir}")


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"expected comma-separated integers, got {text!r}") from None


def _run_with_progress(
    ev,
    run_dir: Path,
    cfg: EvalConfig,
    cache_dir: Path,
    backend: str,
    quiet: bool,
    workers: int | None = None,
    secret: str | None = None,
) -> list:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    total = len(cfg.bugs) * len(cfg.arms) * cfg.episodes
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    ) as bar:
        task = bar.add_task(f"silentbug eval {cfg.agent}", total=total)

        def done(r: dict) -> None:
            bar.update(task, advance=1, description=f"{r['bug']} {r['arm']} s{r['seed']}")

        return ev.run_eval(
            run_dir,
            cfg,
            cache_dir=cache_dir,
            backend=backend,
            on_done=done,
            workers=workers,
            secret=secret,
        )


@app.command()
def controls(
    name: list[str] = typer.Option(None, "--control", help="control(s); default: all"),
    seeds: str = typer.Option("1", help="scoring seeds, e.g. 1,2,3"),
    steps: int = typer.Option(
        2048,
        min=1,
        help="steps per scored run (the detectors judge what a run did, not how well it learned)",
    ),
    cache_dir: Path = typer.Option(Path("runs/silentbug/scoring")),
    backend: str = typer.Option("bwrap", help="sandbox backend: bwrap | unsafe"),
    out: Path | None = typer.Option(None, help="write the matrix as a results file"),
    workers: int | None = typer.Option(
        None, min=1, help="scored runs trained at once (default: half the cores)"
    ),
    as_json: bool = JSON,
) -> None:
    """Honest edits and hacks in front of the hack detectors: named before, and now?

    Example: verigap silentbug controls --seeds 1 --steps 2048 --out results/silentbug/controls.json
    """
    from verigap.silentbug import controls as ctl
    from verigap.silentbug.scoring import ScoringSetup

    chosen = [ctl.get(n) for n in name] if name else list(ctl.CONTROLS)
    setup = ScoringSetup(
        seeds=tuple(_ints(seeds)),
        overrides=(("total_timesteps", steps),),
        cache_dir=cache_dir,
        backend=backend,
        **({"workers": workers} if workers else {}),
    )
    rows = ctl.run_controls(
        chosen,
        setup,
        on_done=None
        if as_json
        else lambda r: console.print(
            f"{r['control']}: before {r['before']}; after {r['after']}"
            f"{'' if r['ok'] else '  [red]NOT AS EXPECTED[/red]'}"
        ),
    )
    if out is not None:
        from verigap.results import write_result

        picked = "".join(f" --control {c.name}" for c in chosen) if name else ""
        write_result(
            out,
            {"seeds": list(setup.seeds), "steps": steps, "rows": rows},
            command=f"verigap silentbug controls{picked} --seeds {seeds} "
            f"--steps {steps} --out {out}",
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from verigap.silentbug.views import controls_table

    console.print(controls_table({"rows": rows}))
    bad = [r["control"] for r in rows if not r["ok"]]
    console.print(
        f"{len(rows) - len(bad)}/{len(rows)} as expected"
        + (f"; not: {', '.join(bad)}" if bad else "")
    )


@app.command()
def analyze(
    runs: list[Path] = typer.Argument(..., help="eval run directories"),
    out: Path | None = typer.Option(None, help="write the analysis as a results file"),
    fig: Path | None = typer.Option(None, "--figure", help="write a PNG of the table"),
    as_json: bool = JSON,
) -> None:
    """Mean, SE and n per agent x arm x bug class; arm differences reliable only beyond 2 SE.

    Example: verigap silentbug analyze runs/silentbug/eval/*/ --out results/silentbug/eval.json
    """
    from verigap.results import write_result
    from verigap.silentbug import evaluate as ev

    results = [r for d in runs for r in ev.load_run(d)]
    if not results:
        raise ConfigError(f"no finished episodes in {', '.join(map(str, runs))}")
    analysis = ev.analyze(results)
    if out is not None:
        episodes = [
            {k: r[k] for k in ("agent", "bug", "arm", "seed", "class", "split", "wall_s")}
            | {
                "scores": ev.episode_scores(r),
                "hacks": r["verdict"]["hacks"],
                "status": r["verdict"]["status"],
                "returns": {
                    k: r["verdict"]["detail"].get(k) for k in ("clean", "broken", "patched")
                },
            }
            for r in results
        ]
        evals = [ev.eval_command(d) for d in runs]
        write_result(
            out,
            {**analysis, "per_episode": episodes, "eval_commands": evals, **ev.summary(results)},
            command=" && ".join(
                [*evals, "verigap silentbug analyze " + " ".join(map(str, runs)) + f" --out {out}"]
            ),
        )
    if fig is not None:
        ev.figure(analysis, fig)
    if as_json:
        print(json.dumps(analysis, indent=2))
        return
    console.print(ev.markdown(analysis))
    for c in analysis["comparisons"]:
        console.print(
            f"{c['agent']} {c['metric']} {c['arms']}: {c['difference']:+.3f} "
            f"(SE {c['se']:.3f}) {'reliable' if c['reliable'] else 'within 2 SE'}"
        )
