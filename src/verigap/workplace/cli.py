"""`verigap workplace context|rubric|local|show`: the workplace family's results.

Library errors (a missing bundle, an unknown project) reach the root, which prints them once."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Tasks whose facts live in tickets, chat, pull requests and git "
    "history; reviewer checks beyond tests.",
    no_args_is_help=True,
)

OUT = Path("results/workplace")


def _command(*words: object, **options: object) -> str:
    parts = ["verigap", "workplace", *map(str, words)]
    for k, v in options.items():
        if v is not None:
            parts += [f"--{k.replace('_', '-')}", str(v)]
    return " ".join(shlex.quote(x) for x in parts)


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(
            "--seeds takes integers separated by commas, e.g. 0,1,2,3"
        ) from None
    if not seeds:
        raise typer.BadParameter("--seeds needs at least one seed, e.g. 0,1,2,3")
    return seeds


def _write(path: Path, data: dict, command: str) -> None:
    from verigap.results import write_result

    write_result(path, data, command=command)
    typer.echo(f"wrote {path}")


@app.command("context")
def context(
    seeds: Annotated[str, typer.Option(help="workplace seeds, comma-separated")] = "0,1,2,3",
    out: Annotated[Path, typer.Option(help="results file")] = OUT / "context.json",
) -> None:
    """Score the reconciling, code-only and outdated-instruction agents on every task and
    probe (per kind), with the facts their tool calls surfaced.

    Example: verigap workplace context --seeds 0,1,2,3
    """
    from verigap.workplace.bench import context_scores

    data = context_scores(_seeds(seeds), log=typer.echo)
    _write(out, data, _command("context", seeds=seeds, out=out))


@app.command("rubric")
def rubric(
    seeds: Annotated[str, typer.Option(help="workplace seeds, comma-separated")] = "0,1,2,3",
    out: Annotated[Path, typer.Option(help="results file")] = OUT / "rubric.json",
) -> None:
    """Careful and sloppy controls on every code task: tests and each reviewer item.

    Example: verigap workplace rubric --seeds 0,1
    """
    from verigap.workplace.bench import rubric_controls

    data = rubric_controls(_seeds(seeds), log=typer.echo)
    _write(out, data, _command("rubric", seeds=seeds, out=out))


@app.command("local")
def local(
    code: Annotated[int, typer.Option(min=0, help="code tasks in the sample")] = 8,
    probes: Annotated[int, typer.Option(min=0, help="probes in the sample")] = 16,
    seed: Annotated[int, typer.Option(help="sampling seed")] = 0,
    formats: Annotated[
        str, typer.Option(help="tool-call formats, comma-separated: plain, primed")
    ] = "primed",
    probe_turns: Annotated[int, typer.Option(min=1, help="model turns per probe")] = 3,
    code_turns: Annotated[int, typer.Option(min=1, help="model turns per code task")] = 4,
    max_new_tokens: Annotated[int, typer.Option(min=8, help="tokens per turn")] = 40,
    spec: Annotated[str, typer.Option(help="model spec")] = "local:smollm2",
    out: Annotated[Path, typer.Option(help="results file")] = OUT / "local_model.json",
) -> None:
    """A model (the local one by default) on a seeded sample of code tasks and probes, in
    each tool-call format: valid calls, facts surfaced, answers and tests, tokens per second.

    Example: verigap workplace local --code 4 --probes 12 --formats primed,plain
    """
    from verigap.workplace.local_model import local_workplace

    if code + probes == 0:
        raise typer.BadParameter("--code and --probes are both 0; ask for at least one item")
    command = _command(
        "local",
        code=code,
        probes=probes,
        seed=seed,
        formats=formats,
        probe_turns=probe_turns,
        code_turns=code_turns,
        max_new_tokens=max_new_tokens,
        spec=spec,
        out=out,
    )
    local_workplace(
        code,
        probes,
        seed,
        formats=tuple(f.strip() for f in formats.split(",") if f.strip()),
        spec=spec,
        max_turns_probe=probe_turns,
        max_turns_code=code_turns,
        max_new_tokens=max_new_tokens,
        log=typer.echo,
        save=lambda data: _write(out, data, command),
    )


@app.command("show")
def show(
    project: Annotated[str, typer.Option(help="textkit or inflection")] = "textkit",
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Print a generated workplace as JSON (the data the tools read).

    Example: verigap workplace show --project inflection --seed 1
    """
    from verigap.workplace import build_workplace

    w = build_workplace(project, seed)
    typer.echo(json.dumps(w.to_dict(), indent=1, ensure_ascii=False, default=repr))
