"""`verigap silentbug ...`: check the bank, ablate, calibrate. Parses, calls, prints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from verigap.errors import VerigapError
from verigap.silentbug.ablation import ablate as run_ablation
from verigap.silentbug.ablation import markdown_table as ablation_markdown
from verigap.silentbug.bank import check_bug, load_registry
from verigap.silentbug.calibrate import cached_curves, markdown_tables
from verigap.silentbug.calibrate import calibrate as run_calibration
from verigap.silentbug.substrate import SUBSTRATES

app = typer.Typer(help="Silent bugs in PPO: bug bank, ablation, calibration.",
                  no_args_is_help=True)
console = Console()

CACHE = typer.Option(Path("runs/silentbug"), help="cache of run directories (keyed by hash)")
WORKERS = typer.Option(None, help="parallel processes (default: all cores)")
JSON = typer.Option(False, "--json", help="print JSON instead of a table")
MARKDOWN = typer.Option(False, "--markdown", help="print Markdown tables instead")


def _fail(e: VerigapError) -> None:
    console.print(f"[red]error:[/red] {e}")
    raise typer.Exit(2)


def _f(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.1f}"


@app.command("list")
def list_bugs(as_json: bool = JSON) -> None:
    """The registered bugs and whether each patch applies.

    Example: verigap silentbug list --json
    """
    try:
        reg = load_registry()
    except VerigapError as e:
        _fail(e)
    rows = [{"id": b.id, "substrate": b.substrate, "class": b.bug_class,
             "component": b.component, "problems": check_bug(b)} for b in reg.bugs]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(title=f"bug bank: {len(rows)} bugs")
    for col in ("id", "substrate", "class", "component", "check"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["id"], r["substrate"], r["class"], r["component"],
                  "ok" if not r["problems"] else "; ".join(r["problems"]))
    console.print(t)
    if any(r["problems"] for r in rows):
        raise typer.Exit(1)


@app.command()
def ablate(substrate: list[str] = typer.Option(["acrobot_modular"], help="substrate(s)"),
           mechanism: list[str] = typer.Option(None, help="mechanism(s); default: all"),
           seeds: int = typer.Option(3, min=2), cache_dir: Path = CACHE,
           out: Path = typer.Option(Path("runs/silentbug/ablation.json")),
           workers: int | None = WORKERS, as_json: bool = JSON,
           markdown: bool = MARKDOWN) -> None:
    """Remove each stability mechanism from the clean code; show which ones hurt.

    Example: verigap silentbug ablate --substrate acrobot_modular --seeds 3
    """
    try:
        rows = run_ablation(substrate, mechanism or None, seeds=seeds, cache_dir=cache_dir,
                            out=out, workers=workers, progress=not (as_json or markdown))
    except VerigapError as e:
        _fail(e)
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
        t.add_row(r.substrate, r.mechanism, f"{_f(r.clean.mean)} ± {_f(r.clean.std)}",
                  f"{_f(r.ablated.mean)} ± {_f(r.ablated.std)}", _f(r.gap.margin),
                  _f(r.gap.threshold), "yes" if r.load_bearing else "no")
    console.print(t)
    console.print(f"written: {out}")


@app.command()
def calibrate(bug: list[str] = typer.Option(None, "--bug", help="bug id(s); default: all"),
              seeds: int = typer.Option(3, min=2), cache_dir: Path = CACHE,
              out: Path = typer.Option(Path("runs/silentbug/baselines.json")),
              workers: int | None = WORKERS, as_json: bool = JSON,
              markdown: bool = MARKDOWN) -> None:
    """Clean vs broken over seeds; accept bugs whose gap clears 3 x the larger seed std.

    Example: verigap silentbug calibrate --seeds 3 --markdown
    """
    try:
        cal = run_calibration(bug or None, seeds=seeds, cache_dir=cache_dir, out=out,
                              workers=workers, progress=not (as_json or markdown))
    except VerigapError as e:
        _fail(e)
    if as_json:
        print(json.dumps(cal.to_dict(), indent=2))
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
        t.add_row(r.bug.id, r.bug.substrate, r.bug.bug_class, _f(r.clean.mean),
                  _f(r.broken.mean) if ran else "not run", _f(r.gap.margin) if ran else "-",
                  _f(r.gap.threshold) if ran else "-",
                  f"[{colour}]{r.verdict}[/{colour}]")
    console.print(t)
    if cal.ablations:
        a = Table(title="ablations behind omission bugs")
        for col in ("substrate", "removed", "clean", "ablated", "drop", "threshold", "load-bearing"):
            a.add_column(col)
        for r in cal.ablations:
            a.add_row(r.substrate, r.mechanism, _f(r.clean.mean), _f(r.ablated.mean),
                      _f(r.gap.margin), _f(r.gap.threshold), "yes" if r.load_bearing else "no")
        console.print(a)
    console.print(f"{len(cal.accepted())}/{len(cal.results)} accepted; "
                  f"{cal.runs_executed} of {cal.runs_total} runs executed, the rest cached; "
                  f"wall {cal.wall_s:.0f} s; written: {out}")


@app.command()
def curves(substrate: list[str] = typer.Option(list(SUBSTRATES), help="substrate(s)"),
           label: str = typer.Option("clean", help="'clean', a bug id or ablate-<mechanism>"),
           seeds: int = typer.Option(3, min=1), bins: int = typer.Option(5, min=1),
           cache_dir: Path = CACHE, as_json: bool = JSON) -> None:
    """Learning curves (mean return per slice of the budget) of cached runs; runs nothing.

    Example: verigap silentbug curves --label clean --bins 5
    """
    try:
        rows = cached_curves(substrate, label, seeds=seeds, bins=bins, cache_dir=cache_dir)
    except VerigapError as e:
        _fail(e)
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
def substrates() -> None:
    """The substrates and their fixed calibration budgets.

    Example: verigap silentbug substrates
    """
    t = Table(title="substrates")
    for col in ("name", "entry", "config", "ablations"):
        t.add_column(col)
    for s in SUBSTRATES.values():
        t.add_row(s.name, s.entry, json.dumps(s.config), ", ".join(s.ablations) or "-")
    console.print(t)
