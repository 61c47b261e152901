"""`verigap serve`: every environment over HTTP (see docs/serving.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from verigap.errors import VerigapError

console = Console(stderr=True)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    tasks: Annotated[Path | None, typer.Option(
        help="Directory of repo task files to serve (from `verigap repos make-tasks`).")] = None,
    root: Annotated[Path, typer.Option(help="Session workspaces and server-side verdicts.")
                    ] = Path("runs/server"),
    max_sessions: Annotated[int, typer.Option(help="Open sessions at once.")] = 8,
    idle_s: Annotated[float, typer.Option(help="Close a session untouched this long.")] = 600.0,
    max_steps: Annotated[int, typer.Option(help="Tool calls per episode.")] = 200,
    episode_wall_s: Annotated[float, typer.Option(help="Seconds per episode.")] = 1800.0,
    backend: Annotated[str, typer.Option(help="Sandbox: bwrap, or unsafe (tests only).")
                       ] = "bwrap",
    reveal_truth: Annotated[bool, typer.Option(
        help="Send full verdicts, truth included (for evaluation, never for training).")
    ] = False,
) -> None:
    """Serve Patch World, repo tasks and silent bugs over HTTP (OpenEnv-style reset/step/state).

    The bearer token comes from the VERIGAP_TOKEN environment variable (required unless the
    server listens on loopback only).

    Example: verigap serve --tasks tasks/ --port 8000
    """
    from verigap.server import ServerConfig, serve_forever

    token = os.environ.get("VERIGAP_TOKEN") or None
    try:
        if token is None and host not in ("127.0.0.1", "localhost", "::1"):
            raise VerigapError(f"--host {host} is reachable from other machines: set "
                               "VERIGAP_TOKEN to a secret bearer token first")
        config = ServerConfig.with_tasks_from(
            tasks, root=root, token=token, max_sessions=max_sessions, idle_s=idle_s,
            max_steps=max_steps, episode_wall_s=episode_wall_s, backend=backend,
            reveal_truth=reveal_truth)
    except (VerigapError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"serving {len(config.tasks)} repo tasks, the silent-bug registry and Patch "
                  f"World on http://{host}:{port} (token {'set' if token else 'off'})")
    serve_forever(config, host, port)
