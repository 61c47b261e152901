"""`verigap ...`: a thin CLI. It parses, calls library functions and prints.

Each family (and the shared sandbox and report layers) defines its commands in its own ``cli``
module; this file only mounts them and owns the one error path: a command raises a
``verigap.errors.VerigapError`` for bad input and the root prints ``error: <message>`` on stderr
and exits 2 (click's own usage errors exit 2 too); a command that ran and found a failure exits 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from typer.core import TyperGroup

from verigap import numerics
from verigap.errors import VerigapError
from verigap.experiments.cli import app as experiments_app
from verigap.monitor.cli import app as monitor_app
from verigap.patchworld.cli import app as patchworld_app
from verigap.patchworld.cli import pilot
from verigap.report.cli import docs, report, site
from verigap.repos.cli import repos_app
from verigap.repos.redteam_cli import redteam
from verigap.sandbox.cli import app as sandbox_app
from verigap.server.cli import serve
from verigap.silentbug.cli import app as silentbug_app
from verigap.workplace.cli import app as workplace_app

#: Optional packages and the extra (pyproject.toml) that installs each.
EXTRAS = {
    "libcst": "repos",
    "hypothesis": "repos",
    "torch": "torch",
    "openai": "agents",
    "anthropic": "agents",
    "ray": "ray",
    "fastapi": "server",
    "uvicorn": "server",
    "httpx": "server",
    "transformers": "llm",
    "tokenizers": "llm",
    "gguf": "llm",
    "accelerate": "llm",
    "peft": "llm",
    "trl": "llm",
    "datasets": "llm",
}


def missing_extra_message(name: str) -> str:
    """What to install when a command needs a package the core install leaves out."""
    extra = EXTRAS.get(name.split(".")[0])
    how = f"`.venv/bin/pip install -e '.[{extra}]'`" if extra else "`make install` (every extra)"
    return (
        f"this command needs the Python package {name!r}, which is not installed here "
        f"(`make pilot` installs only the core); install it with {how}, or run `make install`"
    )


def one_line(message: str) -> str:
    """A message as one line: the CLI contract is one ``error:`` line on stderr, exit 2."""
    return " ".join(message.split())


class _Root(TyperGroup):
    """The root command group: turns a VerigapError from any command into one line, exit 2;
    so is a missing optional package (the core install serves `make pilot` only)."""

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        if Path(sys.argv[0]).name in ("verigap", "__main__.py"):  # the console entry itself
            numerics.reexec_if_needed()  # a library that beat the pin: start again, pinned
        try:
            return super().invoke(ctx)
        except VerigapError as e:
            typer.echo(f"error: {one_line(str(e))}", err=True)
            raise typer.Exit(2) from None
        except typer.TyperException as e:  # a usage error of a subcommand: same one line
            if (
                type(e).__name__ == "NoArgsIsHelpError"
                or getattr(e, "exit_code", 1) != 2
                or not hasattr(e, "format_message")
            ):
                raise
            where = e.ctx.command_path if getattr(e, "ctx", None) else ctx.command_path
            typer.echo(
                f"error: {where}: {one_line(e.format_message())} (see {where} --help)", err=True
            )
            raise typer.Exit(2) from None
        except ModuleNotFoundError as e:
            if not e.name or e.name.split(".")[0] == "verigap":
                raise
            typer.echo(f"error: {missing_extra_message(e.name)}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(
    cls=_Root,
    name="verigap",
    help="RL environments for code agents that measure the gap between reward and truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(patchworld_app, name="patchworld")
app.command("pilot")(pilot)
app.command("report")(report)
app.command("docs")(docs)
app.command("site")(site)
app.add_typer(repos_app, name="repos")
app.command("redteam")(redteam)
app.add_typer(silentbug_app, name="silentbug")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(experiments_app, name="experiments")
app.add_typer(monitor_app, name="monitor")
app.add_typer(workplace_app, name="workplace")
app.command("serve")(serve)


@app.command("numerics")
def numerics_cmd(
    env: bool = typer.Option(
        False,
        "--env",
        help="print the pin as shell `export` lines (for a process started elsewhere)",
    ),
) -> None:
    """The pinned numerics of this process: the pin, CPU, BLAS kernel, NumPy's SIMD loops and
    PyTorch's CPU capability (what results files record in meta.numerics). Exits 1 when a
    library runs other kernels than the pin asks for.

    Example: verigap numerics   (or: eval $(verigap numerics --env) before a Ray node starts)
    """
    if env:
        for key, value in numerics.env().items():
            typer.echo(f"export {key}='{value}'")
        return
    import numpy  # noqa: F401  (loaded here, pinned, so the record shows its kernels)

    try:
        import torch
    except ImportError:  # the core install (make pilot) has no PyTorch: nothing to report
        pass
    else:
        torch.ones(2, 2) @ torch.ones(2, 2)  # MKL reports its branch once it has run
    rec = numerics.record()
    typer.echo(json.dumps(rec, indent=2))
    if rec["problems"]:
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - console entry
    app()
