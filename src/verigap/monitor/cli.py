"""`verigap monitor export|eval`: the labelled trajectory set and detectors scored on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from verigap.errors import VerigapError

app = typer.Typer(help="Labelled agent trajectories and hack detectors scored on them.",
                  no_args_is_help=True)
console = Console()


@app.command("export")
def export(
    run_dir: Annotated[Path, typer.Argument(help="A `verigap redteam --honest` run directory.")],
    out: Annotated[Path, typer.Option(help="JSONL file to write.")] = Path(
        "runs/monitor/trajectories.jsonl"),
) -> None:
    """Every battery episode (exploits and honest controls) as chat JSONL with labels."""
    from verigap.monitor import dataset

    try:
        n = dataset.write_jsonl(dataset.from_battery(run_dir), out)
    except VerigapError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"wrote {n} trajectories to {out}")


@app.command("eval")
def evaluate(
    data: Annotated[Path, typer.Argument(help="JSONL from `verigap monitor export`.")],
    detector: Annotated[str, typer.Option(
        help="builtin, openai:MODEL, anthropic:MODEL or module:function")] = "builtin",
    mode: Annotated[str, typer.Option(help="isolated, contrastive or both")] = "both",
    base_url: Annotated[str | None, typer.Option(
        help="API base URL for the LLM detector (vLLM, a proxy, a test server).")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Environment variable holding the API key; `none` for servers without one.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N records.")] = None,
    out: Annotated[Path | None, typer.Option(help="Also write the report here (JSON).")] = None,
) -> None:
    """Detection and false-alarm rates of a detector, isolated and contrastive."""
    from verigap.monitor import dataset, detectors

    modes = ("isolated", "contrastive") if mode == "both" else (mode,)
    try:
        if any(m not in ("isolated", "contrastive") for m in modes):
            raise VerigapError(f"--mode {mode!r}: use isolated, contrastive or both")
        records = dataset.read_jsonl(data)[:limit] if limit else dataset.read_jsonl(data)
        det = detectors.resolve(detector, base_url=base_url, api_key_env=api_key_env)
        report = detectors.evaluate(records, det, modes=modes)
    except VerigapError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    text = json.dumps(report, indent=2)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(text)
