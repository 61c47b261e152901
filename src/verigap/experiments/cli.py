"""`verigap experiments list | run [IDS] [--quick] | verdicts [--json] [--markdown FILE]`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from verigap.cli_options import hidden_alias, json_option, renamed
from verigap.errors import ConfigError, VerigapError
from verigap.experiments.registry import DEFAULT_REGISTRY, load_registry
from verigap.experiments.render import (
    figure,
    first_rule_label,
    fmt_interval,
    fmt_num,
    markdown,
    rule_change_text,
    sort_rows,
    splice,
)
from verigap.experiments.render import verdict_label as label
from verigap.experiments.runner import RESULTS, RUNS, plan, run_log
from verigap.experiments.verdicts import log_summary, status, tally_text
from verigap.experiments.verdicts import rejudge as rejudge_entries
from verigap.results import read_meta, read_result, write_result

app = typer.Typer(
    help="The experiment log: pre-registered predictions and their verdicts.", no_args_is_help=True
)
console = Console()
REG = typer.Option(DEFAULT_REGISTRY, "--registry", help="the prediction registry (YAML)")
COLORS = {"supported": "green", "refuted": "red", "inconclusive": "yellow"}


def _fail(msg: str) -> NoReturn:
    """Errors go through the root: one ``error:`` line on stderr, exit 2."""
    raise ConfigError(msg)


@app.command("list")
def list_(registry: Path = REG) -> None:
    """Every prediction: id, the settings it needs and its criterion.

    Example: verigap experiments list
    """
    try:
        reg = load_registry(registry)
    except VerigapError as e:
        _fail(str(e))
    jobs, _ = plan(reg, None, RUNS)
    t = Table(
        title=f"{len(reg.predictions)} predictions, {len(jobs)} distinct runs "
        f"({len(reg.seeds)} seeds)"
    )
    for col in ("id", "prediction", "criterion"):
        t.add_column(col)
    for p in reg.predictions:
        t.add_row(
            p.id + (" (sanity check)" if p.sanity_check else ""),
            escape(p.prediction),
            escape(p.criterion.describe()),
        )
    console.print(t)


@app.command()
def run(
    ids: list[str] = typer.Argument(None, help="prediction ids (default: all)"),
    quick: bool = typer.Option(False, help="small, fast runs; verdicts go to the runs dir"),
    registry: Path = REG,
    out: Path = typer.Option(None, help="runs directory (default runs/experiments[-quick])"),
    save: Path = typer.Option(
        None, "--save", help=f"verdicts file (default {RESULTS}; --quick: OUT/verdicts.json)"
    ),
    results: Path = hidden_alias("--results", "--save"),
    executor: str = typer.Option("process", help="serial | process | ray"),
    workers: int = typer.Option(0, help="process-pool size (0: all cores)"),
    finished_only: bool = typer.Option(
        False, help="start nothing: judge the predictions whose runs have all finished"
    ),
    as_json: bool = json_option(),
) -> None:
    """Run (resumably) what the predictions need, then compute and store their verdicts.

    Example: verigap experiments run E01 E05 --quick
    """
    if executor not in ("serial", "process", "ray"):
        _fail(f"--executor {executor!r}: use serial, process or ray")
    results = renamed(save, results, "--save", "--results")
    runs_dir = out or (Path("runs/experiments-quick") if quick else RUNS)
    results_path = results or (runs_dir / "verdicts.json" if quick else RESULTS)
    try:
        reg = load_registry(registry)
        data = run_log(
            reg,
            ids or None,
            runs_dir=runs_dir,
            results_path=results_path,
            quick=quick,
            executor=executor,
            workers=workers or None,  # type: ignore[arg-type]
            registry_path=registry,
            finished_only=finished_only,
        )
    except (VerigapError, ValueError) as e:
        _fail(str(e))
    inv = data["last_invocation"]
    if as_json:
        print(
            json.dumps(
                {
                    "results": str(results_path),
                    "last_invocation": inv,
                    "verdicts": [
                        r for r in status(reg, data["predictions"]) if r.get("id") in inv["ids"]
                    ],
                },
                indent=2,
                default=str,
            )
        )
        return
    console.print(
        f"{len(inv['ids'])} predictions, {inv['runs']} runs; this invocation "
        f"{inv['cpu_s']:.0f} CPU s, {inv['wall_s']:.0f} s wall; the runs' own CPU "
        f"time sums to {inv['run_cpu_s_sum']:.0f} s. Verdicts: {results_path}"
    )
    _table(status(reg, data["predictions"]), [p for p in inv["ids"]])


def _table(rows: list[dict], only: list[str] | None = None) -> None:
    t = Table(title=f"verdicts (refuted first): {tally_text(rows)}")
    for col in ("id", "verdict", "first rule", "criterion", "statistic", "interval", "per seed"):
        t.add_column(col)
    for r in sort_rows(rows):
        if only is not None and r["id"] not in only:
            continue
        color = COLORS.get(r["verdict"], "white")
        t.add_row(
            r["id"],
            f"[{color}]{label(r)}[/{color}]",
            first_rule_label(r),
            escape(r["criterion_text"]),
            fmt_num(r.get("statistic")),
            fmt_interval(r.get("interval")),
            ", ".join(fmt_num(x) for x in r.get("seed_statistics") or []) or "—",
        )
        if r["amended"] and r.get("original"):
            o = r["original"]
            t.add_row(
                "",
                f"[dim]original: {o['verdict']}[/dim]",
                "",
                f"[dim]{escape(o['criterion_text'])}",
                fmt_num(o["statistic"]),
                fmt_interval(o["interval"]),
                "",
            )
    console.print(t)


@app.command()
def verdicts(
    registry: Path = REG,
    results: Path = typer.Option(RESULTS, help="the verdicts file"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    markdown_file: Path = typer.Option(
        None, "--markdown", help="rewrite the generated table in this file"
    ),
    figure_file: Path = typer.Option(
        None, "--figure", help="also draw final false success per setting"
    ),
) -> None:
    """The verdict table: supported / refuted / inconclusive with the numbers behind each;
    predictions edited after their verdict show as amended beside the original.

    Example: verigap experiments verdicts --json
    """
    try:
        reg = load_registry(registry)
        data = read_result(results)
    except VerigapError as e:
        _fail(str(e))
    rows = status(reg, data["predictions"])
    if figure_file is not None:
        figure(rows, str(figure_file))
        console.print(f"wrote {figure_file}")
    if markdown_file is not None:
        try:
            markdown_file.write_text(splice(markdown_file.read_text(), markdown(rows)))
        except (OSError, ValueError) as e:
            _fail(f"{markdown_file}: {e}")
        console.print(f"wrote the verdict table into {markdown_file}")
        return
    if as_json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return
    _table(rows)


@app.command()
def curves(
    registry: Path = REG,
    runs: Path = typer.Option(RUNS, help="the runs directory the log ran into"),
    save: Path = typer.Option(..., help="the curves file to write (JSON)"),
    settings: list[str] = typer.Option(None, "--setting", help="default: all"),
) -> None:
    """Write every run's training curve as it stands (finished, partial or not started), so an
    unfinished log still shows what it has, labelled.

    Example: verigap experiments curves --registry src/verigap/experiments/predictions_language_model.yaml --runs runs/experiments-language-model --save results/llm/lm_curves.json
    """
    from verigap.experiments.language_model import run_curves

    try:
        reg = load_registry(registry)
        for s in settings or []:
            if s not in reg.settings:
                raise ConfigError(f"--setting {s}: unknown; known: {', '.join(reg.settings)}")
        data = run_curves(reg, runs, settings or None)
    except VerigapError as e:
        _fail(str(e))
    write_result(
        save,
        {"registry": str(registry), "settings": data},
        command=f"verigap experiments curves --registry {registry} --runs {runs} --save {save}",
    )
    for s, d in data.items():
        console.print(
            f"{s}: "
            + ", ".join(
                f"seed {k} {v['status']} ({v['steps_done']}/{v['steps']} steps)"
                for k, v in d["seeds"].items()
            )
        )


@app.command()
def rejudge(
    registry: Path = REG,
    results: Path = typer.Option(RESULTS, help="the verdicts file to judge again"),
) -> None:
    """Judge every stored verdict again by the current rule from its stored per-seed values
    (no run is redone); an earlier rule's verdict stays beside it under ``superseded``, and
    sanity-check markings are refreshed from the registry. Rewrites RESULTS in place.

    Example: verigap experiments rejudge --registry src/verigap/experiments/predictions_transformer.yaml --results results/experiments/verdicts_transformer.json
    """
    try:
        reg = load_registry(registry)
        data = read_result(results)
        meta = read_meta(results)
    except VerigapError as e:
        _fail(str(e))
    entries = rejudge_entries(reg, data["predictions"])
    data = {**data, "predictions": entries, "summary": log_summary(entries)}
    for stale in ("rule", "rule_changes"):
        data.pop(stale, None)
    step = f"verigap experiments rejudge --registry {registry} --results {results}"
    cmd = meta.get("command", "")
    write_result(results, data, command=cmd if step in cmd else f"{cmd} && {step}".lstrip(" &"))
    console.print(f"{results}: {tally_text(data['predictions'].values())}")
    console.print(rule_change_text(data["predictions"]) or "no verdict had an earlier rule")
