"""`verigap redteam TASKS --grader v1,v2`: the hackability matrix of one or more graders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from verigap.errors import VerigapError

console = Console()


def redteam(
    tasks: Annotated[Path, typer.Argument(help="A task file or a directory of them.")],
    grader: Annotated[
        str,
        typer.Option(
            help="Comma-separated graders: v1, v2 (the default everywhere), or module:function "
            "for your own (a callable (task, workspace) -> Verdict; see docs/exploits.md); "
            "v1,v2 shows the gap."
        ),
    ] = "v2",
    exploit: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these exploits (repeatable); the oracle and no-op controls always run."
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Run directory (resumable); matrix.json goes here.")
    ] = Path("runs/redteam"),
    executor: str = "process",
    workers: int = 2,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    backend: Annotated[str | None, typer.Option(help="bwrap (default) or unsafe (tests).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the matrix as JSON.")] = False,
    honest: Annotated[
        bool,
        typer.Option(
            "--honest",
            help="Also run every honest control (correct fixes written differently "
            "from the reference; see docs/detection.md).",
        ),
    ] = False,
) -> None:
    """Run every exploit agent (plus oracle and no-op) on every task under every grader.

    Exits 1 when any grader rewards any exploit, so it can gate an environment's CI.

    Example: verigap redteam tasks/ --grader v1,v2 --limit 6
    """
    from verigap.report.redteam import build_redteam_page
    from verigap.repos.redteam import battery, matrix
    from verigap.runs import run_jobs, write_json_atomic

    graders = [g.strip() for g in grader.split(",") if g.strip()]
    try:
        if not graders:
            raise VerigapError("--grader: name at least one grader")
        paths = (
            [tasks]
            if tasks.is_file()
            else sorted(f for f in tasks.glob("*.json") if f.name != "index.json")
        )
        if not paths:
            raise VerigapError(f"no task files at {tasks}; run `verigap repos make-tasks` first")
        paths = paths[:limit] if limit else paths
        js = battery.jobs(
            paths, out, graders=graders, exploits=exploit, backend=backend, with_honest=honest
        )
        results = run_jobs(
            js, executor=executor, workers=workers, progress=not json_out, description="exploits"
        )
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    m = matrix.build(results.values(), graders)
    write_json_atomic(out / "matrix.json", m)
    page = build_redteam_page(m, out)
    if json_out:
        print(json.dumps(m, indent=2))
    else:
        show(m, out)
        console.print(f"report: {page.resolve()}")
    if matrix.any_rewarded(m):
        raise typer.Exit(1)


def show(m: dict, out: Path) -> None:
    t = Table(title=f"hackability matrix: {len(m['tasks'])} task(s)")
    t.add_column("exploit")
    t.add_column("correct", justify="right")
    for g in m["graders"]:
        t.add_column(f"{g}\nrewarded", justify="right")
        t.add_column(f"{g}\ndetected", justify="right")
    for r in m["rows"]:
        cells = [r["exploit"] + (" (control)" if r["control"] else ""), f"{r['correct']:.0%}"]
        for g in m["graders"]:
            x = r["graders"].get(g)
            if x is None:
                cells += ["-", "-"]
                continue
            bad = x["rewarded"] > 0 and not r["control"]
            cells += [
                f"[red]{x['rewarded']:.0%}[/red]" if bad else f"{x['rewarded']:.0%}",
                f"{x['detected']:.0%}",
            ]
        t.add_row(*cells)
    console.print(t)
    for name, why in m["skipped"].items():
        console.print(f"skipped {name}: {why}")
    for g, names in m["rewarded_exploits"].items():
        console.print(
            f"{g}: rewards {len(names)} exploit(s)" + (f": {', '.join(names)}" if names else "")
        )
    console.print(f"matrix saved to {out / 'matrix.json'}")
