"""A family served over HTTP for a test module, played with openenv-core's own client: one
trainer client that may read the truth, its client for a family's route, and the truth of an
episode (the one verdict ``/episodes/{id}/truth`` holds)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from verigap.server import BackgroundServer, ServerConfig


@contextmanager
def serving(root: Path, token: str) -> Iterator[str]:
    """A server in bubblewrap sandboxes whose one client, ``trainer``, may read the truth."""
    config = ServerConfig(
        root=root,
        backend="bwrap",
        clients={"trainer": {"token": token, "truth": True}},
        max_sessions=4,
    )
    with BackgroundServer(config) as url:
        yield url


def env_client(url: str, token: str, family: str) -> Any:
    """openenv-core's synchronous client for ``/envs/<family>``, as the trainer."""
    from openenv.core import GenericEnvClient

    return GenericEnvClient(
        base_url=url.replace("http://", f"http://trainer:{token}@") + f"/envs/{family}"
    ).sync()


def episode_truth(url: str, token: str, episode_id: str) -> dict[str, Any]:
    r = httpx.get(
        f"{url}/episodes/{episode_id}/truth", headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200, r.text
    (verdict,) = r.json()["verdicts"]
    return verdict
