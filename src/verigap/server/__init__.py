"""Every verigap environment over HTTP, OpenEnv-style: ``verigap serve``, a client, and
Gymnasium wrappers. See docs/serving.md."""

from verigap.server._app import create_app
from verigap.server._client import (
    Client,
    RemotePatchWorldEnv,
    RemoteSession,
    RemoteToolEnv,
    ServerError,
    ServerUnreachable,
    patchworld_arrays,
)
from verigap.server._envs import public_verdict
from verigap.server._models import (
    Action,
    Observation,
    PatchWorldAction,
    PatchWorldObservation,
    State,
    StepResult,
    ToolAction,
    ToolObservation,
)
from verigap.server._runner import BackgroundServer, serve_forever
from verigap.server._sessions import ServerConfig, SessionManager
from verigap.server._silentbug import grade_silentbug_episode

__all__ = [
    "Action",
    "BackgroundServer",
    "Client",
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
    "State",
    "StepResult",
    "ToolAction",
    "ToolObservation",
    "create_app",
    "grade_silentbug_episode",
    "patchworld_arrays",
    "public_verdict",
    "serve_forever",
]
