"""Every verigap environment over HTTP and OpenEnv's WebSocket: ``verigap serve``, a client,
Gymnasium wrappers, and a ``verifiers`` taskset plugin (``verifiers_env``). See docs/serving.md.

The names below load on first use (PEP 562), so that ``verigap.server.cli`` — mounted by the
root CLI — imports without the ``server`` extra (FastAPI, uvicorn, httpx): ``make pilot``
installs the core alone.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "create_app": "_app",
    "AnyText": "_client",
    "ToolCallSpace": "_client",
    "Client": "_client",
    "RemotePatchWorldEnv": "_client",
    "RemoteSession": "_client",
    "RemoteToolEnv": "_client",
    "ServerError": "_client",
    "ServerUnreachable": "_client",
    "patchworld_arrays": "_client",
    "public_verdict": "_envs",
    "Action": "_models",
    "Observation": "_models",
    "PatchWorldAction": "_models",
    "PatchWorldObservation": "_models",
    "State": "_models",
    "StepResult": "_models",
    "ToolAction": "_models",
    "ToolObservation": "_models",
    "BackgroundServer": "_runner",
    "serve_forever": "_runner",
    "ClientCredential": "_sessions",
    "ServerConfig": "_sessions",
    "SessionManager": "_sessions",
    "SilentBugGrader": "_silentbug",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'verigap.server' has no attribute {name!r}")
    return getattr(importlib.import_module(f"verigap.server.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "Action",
    "AnyText",
    "BackgroundServer",
    "Client",
    "ClientCredential",
    "Observation",
    "PatchWorldAction",
    "PatchWorldObservation",
    "RemotePatchWorldEnv",
    "RemoteSession",
    "RemoteToolEnv",
    "ServerConfig",
    "ServerError",
    "ServerUnreachable",
    "SessionManager",
    "SilentBugGrader",
    "State",
    "StepResult",
    "ToolAction",
    "ToolCallSpace",
    "ToolObservation",
    "create_app",
    "patchworld_arrays",
    "public_verdict",
    "serve_forever",
]
