"""`verigap serve`: every environment over HTTP (see docs/serving.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from verigap.errors import ConfigError, VerigapError

console = Console(stderr=True)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    tasks: Annotated[
        Path | None,
        typer.Option(
            help="Directory of repo task files to serve (from `verigap repos make-tasks`)."
        ),
    ] = None,
    root: Annotated[Path, typer.Option(help="Session workspaces and server-side verdicts.")] = Path(
        "runs/server"
    ),
    max_sessions: Annotated[int, typer.Option(help="Open sessions at once.")] = 8,
    idle_s: Annotated[float, typer.Option(help="Close a session untouched this long.")] = 600.0,
    max_steps: Annotated[int, typer.Option(help="Tool calls per episode.")] = 200,
    episode_wall_s: Annotated[float, typer.Option(help="Seconds per episode.")] = 1800.0,
    backend: Annotated[str, typer.Option(help="Sandbox: bwrap, or unsafe (tests only).")] = "bwrap",
    reveal_truth: Annotated[
        bool,
        typer.Option(
            help="Send full verdicts, truth included (for evaluation, never for training)."
        ),
    ] = False,
    clients: Annotated[
        Path | None,
        typer.Option(
            help='JSON file of per-client credentials, {"NAME": {"token": "...", "truth": false}}; '
            "each client owns the sessions it creates; truth: may fetch an episode's full "
            "verdict (GET /episodes/{id}/truth)."
        ),
    ] = None,
    max_file_mb: Annotated[
        int,
        typer.Option(
            help="Largest file a tool may write (the sandbox's limit) and request-body cap."
        ),
    ] = 256,
    ray_shards: Annotated[
        int,
        typer.Option(
            help="Serve on Ray Serve across the Ray cluster at RAY_ADDRESS instead: this many "
            "shards (one server each, --root/shardN, --max-sessions each) behind a router "
            "that pins each session to its shard. 0: one plain process."
        ),
    ] = 0,
) -> None:
    """Serve Patch World, repo tasks and silent bugs over HTTP (OpenEnv-style reset/step/state).

    Credentials: --clients FILE (one token per client) and/or the VERIGAP_TOKEN environment
    variable (the client "default"); one of them is required unless the server listens on
    loopback only. OpenEnv clients connect to http://NAME:TOKEN@HOST:PORT (or .../envs/repo).

    Ray Serve (--ray-shards N): start the cluster with `ray start` first and run this on its
    head node with RAY_ADDRESS set; see docs/serving.md.

    Example: verigap serve --tasks tasks/ --port 8000
    """
    from verigap.server import ServerConfig, serve_forever

    token = os.environ.get("VERIGAP_TOKEN") or None
    if backend not in ("bwrap", "unsafe"):
        raise ConfigError(f"--backend {backend!r}: use bwrap, or unsafe (tests only)")
    if not 0 < port < 65536:
        raise ConfigError(f"--port {port}: use a TCP port in 1..65535")
    try:
        creds = _load_clients(clients) if clients is not None else {}
        if token is None and not creds and host not in ("127.0.0.1", "localhost", "::1"):
            raise VerigapError(
                f"--host {host} is reachable from other machines: set "
                "VERIGAP_TOKEN or --clients FILE first"
            )
        config = ServerConfig.with_tasks_from(
            tasks,
            root=root,
            token=token,
            clients=creds,
            max_sessions=max_sessions,
            idle_s=idle_s,
            max_steps=max_steps,
            episode_wall_s=episode_wall_s,
            backend=backend,
            reveal_truth=reveal_truth,
            max_file_mb=max_file_mb,
        )
    except VerigapError:
        raise  # the root prints it: one line on stderr, exit 2
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if ray_shards:
        _serve_on_ray(config, ray_shards, host, port)
        return
    console.print(
        f"serving {len(config.tasks)} repo tasks, the silent-bug registry and Patch "
        f"World on http://{host}:{port} (credentials: {len(config.credentials()) or 'off'})"
    )
    serve_forever(config, host, port)


def _serve_on_ray(config: object, shards: int, host: str, port: int) -> None:
    """Deploy on the running Ray cluster and hold the deployment until Ctrl-C."""
    import threading

    from verigap.server.rayserve import deploy, shard_configs, shutdown

    try:
        shard_configs(config, shards)  # type: ignore[arg-type]
    except VerigapError as e:
        raise ConfigError(f"--ray-shards {shards}: {e}") from None
    try:
        import ray

        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), logging_level="ERROR")
    except (ImportError, ConnectionError) as e:
        raise ConfigError(
            f"--ray-shards: no Ray cluster to join ({e}); start one with "
            "`ray start --head`, set RAY_ADDRESS, and pip install "
            "'verigap[ray]'"
        ) from None
    url = deploy(config, shards, host=host, port=port)  # type: ignore[arg-type]
    console.print(f"serving on Ray Serve at {url}: {shards} shards (Ctrl-C stops it)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        shutdown()


def _load_clients(path: Path) -> dict:
    """The --clients file, validated (a bad entry names itself and the fix)."""
    import json

    from verigap.server._sessions import ClientCredential

    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise VerigapError(f"--clients {path}: cannot read it as JSON ({e})") from None
    if not isinstance(raw, dict) or not raw:
        raise VerigapError(
            f'--clients {path}: expected {{"NAME": {{"token": "...", "truth": false}}, ...}}'
        )
    out = {}
    for name, entry in raw.items():
        try:
            out[name] = ClientCredential.model_validate(entry)
        except ValueError as e:
            first = str(e).splitlines()[1:3]
            raise VerigapError(f"--clients {path}: client {name!r}: {' '.join(first)}") from None
    tokens = [c.token for c in out.values()]
    if len(set(tokens)) != len(tokens):
        raise VerigapError(f"--clients {path}: two clients share a token; give each its own")
    return out
