"""Sessions: one served environment each, with an owner, a budget, an idle timeout and a
worker thread of its own.

The manager owns every session of one server process. A session belongs to the client whose
credential created it (``ServerConfig.clients``); no other client can see, step or close it.
Each session runs its environment's work (reset, step, grading) on its own single worker
thread, so one long command never holds up another session or the server's own routes. Each
has its own directory under the server's root (its workspaces); finished episodes' full
verdicts go to the server's ``verdicts.jsonl`` and, for clients allowed the truth, stay
fetchable per episode; a session that sits idle past its ``idle_s`` is closed the next time
anyone touches the manager, or by the app's reaper. A new process removes the session
directories an earlier process left behind, so a restart never serves a half-finished episode.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verigap.errors import ConfigError, VerigapError
from verigap.server import (  # noqa: F401 (_webapp and _workplace register their families)
    _webapp,
    _workplace,
    families,
)
from verigap.server._envs import Limits, ServedEnv, parse_options


class SessionNotFound(VerigapError):
    pass


class TooManySessions(VerigapError):
    pass


class TruthNotAllowed(VerigapError):
    """A client asked for an episode's truth without the right to see it."""


LOCAL = "local"
"""The owner of every session when the server runs without credentials (loopback only)."""


class ClientCredential(BaseModel):
    """One client of the server: its bearer token, and whether it may fetch episodes' truth."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str = Field(min_length=16, description="secret bearer token (16 characters or more)")
    truth: bool = Field(False, description="may fetch full verdicts (truth included) per episode")


class ServerConfig(BaseModel):
    """Everything an operator sets when starting ``verigap serve``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    root: Path = Field(Path("runs/server"), description="session workspaces and verdicts")
    token: str | None = Field(None, description="one bearer token: the client 'default'")
    clients: dict[str, ClientCredential] = Field(
        default_factory=dict,
        description="client name -> credential; each client owns the sessions it creates",
    )
    max_file_mb: int = Field(
        256,
        ge=1,
        description="largest file a tool may write and largest "
        "request body (beyond a 1 MiB envelope), as the sandbox's limit",
    )
    max_sessions: int = Field(8, ge=1, description="open sessions at once")
    idle_s: float = Field(600.0, gt=0, description="close a session untouched this long")
    max_steps: int = Field(200, ge=1, description="tool calls per episode before it is graded")
    episode_wall_s: float = Field(1800.0, gt=0, description="wall-clock seconds per episode")
    command_timeout_s: float = Field(120.0, gt=0, description="per tool command")
    backend: str = Field("bwrap", description="sandbox backend: bwrap, or unsafe for tests")
    tasks: dict[str, Path] = Field(default_factory=dict, description="repo task id -> task file")
    reveal_truth: bool = Field(False, description="send full verdicts (truth included)")
    session_prefix: str = Field(
        "",
        pattern=r"^([a-z0-9]+-)?$",
        description="prepended to every "
        "session id, so a router can tell which server holds a session "
        "(the Ray Serve shards: 's0-', 's1-', ...)",
    )
    silentbug_grader: Callable[..., Any] | None = Field(
        None,
        description="(EpisodeRecord) -> Verdict; default: the silent-bug benchmark's "
        "scorer on the calibration seeds (verigap.server.SilentBugGrader)",
    )

    def credentials(self) -> dict[str, tuple[str, bool]]:
        """token -> (client name, may see truth); empty when the server needs no token."""
        out = {c.token: (name, c.truth) for name, c in self.clients.items()}
        if self.token is not None:
            out.setdefault(self.token, ("default", False))
        return out

    @classmethod
    def with_tasks_from(cls, tasks_dir: Path | None, **kw: Any) -> ServerConfig:
        """Serve every task file in ``tasks_dir`` (as written by ``verigap repos make-tasks``)."""
        tasks: dict[str, Path] = {}
        if tasks_dir is not None:
            from verigap.repos.schema import RepoTask

            files = sorted(f for f in Path(tasks_dir).glob("*.json") if f.name != "index.json")
            if not files:
                raise ConfigError(
                    f"--tasks {tasks_dir}: no task files; run `verigap repos make-tasks` first"
                )
            tasks = {RepoTask.load(f).task_id: f for f in files}
        return cls(tasks=tasks, **kw)


class SessionBudget(BaseModel):
    """What a client may ask for at session creation: at most the server's budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int | None = Field(None, ge=1)
    wall_s: float | None = Field(None, gt=0)
    idle_s: float | None = Field(
        None,
        gt=0,
        description="close this session sooner when idle "
        "(a crashed script's session frees its slot after this long)",
    )


@dataclass
class Session:
    id: str
    env: ServedEnv
    last_used: float
    owner: str = LOCAL
    idle_s: float = 600.0
    config: dict[str, Any] = field(default_factory=dict)
    episode_id: str | None = None
    busy: int = 0
    """requests running or queued on the worker; a busy session is never reaped"""
    last_request: tuple[str, Any] | None = None
    """(request_id, result) of the last step: a retried step answers it again"""
    worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="verigap-session")
    )

    def summary(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "env": self.env.name,
            "episode_id": self.episode_id,
            "step_count": self.env.step_count,
            "done": self.env.done,
            "task_id": self.env.task_id,
            "busy": self.busy > 0,
        }


_KEPT_EPISODES = 4096
"""Finished episodes whose full verdicts stay fetchable in memory (the log keeps them all)."""


class SessionManager:
    """Creates, finds, expires and closes sessions; thread-safe."""

    def __init__(self, config: ServerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.root = Path(config.root) / "sessions"
        if self.root.exists():  # left by an earlier process: those sessions are gone
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        self.log_path = Path(config.root) / "verdicts.jsonl"
        self._sessions: dict[str, Session] = {}
        self._episodes: OrderedDict[str, tuple[str, str, list[dict[str, Any]]]] = OrderedDict()
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, env: str, config: dict[str, Any], owner: str = LOCAL) -> Session:
        self.reap()
        c = self.config
        budget_keys = {"max_steps", "wall_s", "idle_s"}
        budget = parse_options(
            SessionBudget, {k: v for k, v in config.items() if k in budget_keys}, "session config"
        )
        env_config = {k: v for k, v in config.items() if k not in budget_keys}
        limits = Limits(
            min(budget.max_steps or c.max_steps, c.max_steps),
            min(budget.wall_s or c.episode_wall_s, c.episode_wall_s),
        )
        with self._lock:
            if len(self._sessions) >= c.max_sessions:
                raise TooManySessions(
                    f"{len(self._sessions)} sessions are open, the server's "
                    f"limit (--max-sessions {c.max_sessions}); close one with "
                    "DELETE /sessions/{id} (GET /sessions lists yours) or "
                    "wait for an idle one to expire"
                )
            sid = c.session_prefix + secrets.token_hex(8)
            workdir = self.root / sid
            workdir.mkdir()
        try:
            served = self._make(env, env_config, workdir, limits)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        session = Session(
            sid,
            served,
            self.clock(),
            owner=owner,
            idle_s=min(budget.idle_s or c.idle_s, c.idle_s),
            config=dict(config),
        )
        with self._lock:
            self._sessions[sid] = session
        return session

    def _make(self, env: str, cfg: dict[str, Any], workdir: Path, limits: Limits) -> ServedEnv:
        return families.make(env, families.EnvContext(workdir, limits, self.config), cfg)

    def record(self, s: Session) -> None:
        """Append the full verdicts of ``s``'s finished episode to the server's log (kept across
        sessions and restarts; written whole and fsynced, so a crash leaves only whole lines),
        and keep them fetchable by the session's owner (:meth:`truth`)."""
        lines = "".join(
            json.dumps(
                {
                    "session_id": s.id,
                    "episode_id": s.episode_id,
                    "owner": s.owner,
                    "env": s.env.name,
                    "verdict": v,
                },
                sort_keys=True,
            )
            + "\n"
            for v in s.env.verdicts
        )
        with self._log_lock, self.log_path.open("a") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())
        if s.episode_id is not None:
            with self._lock:
                self._episodes[s.episode_id] = (s.owner, s.id, list(s.env.verdicts))
                self._episodes.move_to_end(s.episode_id)
                while len(self._episodes) > _KEPT_EPISODES:
                    self._episodes.popitem(last=False)

    def truth(self, episode_id: str, owner: str, allowed: bool) -> dict[str, Any]:
        """The full verdicts of one finished episode, for its owner when allowed the truth."""
        if not (allowed or self.config.reveal_truth):
            raise TruthNotAllowed(
                f"client {owner!r} may not see the truth: give its credential "
                '"truth": true in --clients, or start the server with '
                "--reveal-truth"
            )
        with self._lock:
            kept = self._episodes.get(episode_id)
        if kept is None or kept[0] != owner:
            raise SessionNotFound(
                f"no finished episode {episode_id!r} of client {owner!r} "
                f"among the last {_KEPT_EPISODES}; the server-side log "
                f"{self.log_path} keeps every one"
            )
        return {"episode_id": episode_id, "session_id": kept[1], "verdicts": kept[2]}

    def get(self, sid: str, owner: str = LOCAL) -> Session:
        self.reap()
        with self._lock:
            s = self._sessions.get(sid)
        if s is None or s.owner != owner:  # another client's session does not exist for you
            raise SessionNotFound(
                f"no session {sid!r} of client {owner!r}: it was closed, "
                f"it expired after {self.config.idle_s:g} s idle (or its "
                "own shorter idle_s), the server restarted, or another "
                "client made it; create a new one with POST /sessions"
            )
        s.last_used = self.clock()
        return s

    def owned(self, owner: str) -> list[Session]:
        """Every open session of ``owner``."""
        self.reap()
        with self._lock:
            return [s for s in self._sessions.values() if s.owner == owner]

    def detach(self, sid: str, owner: str = LOCAL) -> Session:
        """Remove the session from the table (no new request finds it) and return it."""
        s = self.get(sid, owner)
        with self._lock:
            self._sessions.pop(sid, None)
        return s

    def close(self, sid: str, owner: str = LOCAL) -> None:
        shut(self.detach(sid, owner))

    def reap(self) -> list[str]:
        """Close every session idle for longer than its ``idle_s`` (and not busy)."""
        now = self.clock()
        with self._lock:
            stale = [
                s for s in self._sessions.values() if now - s.last_used > s.idle_s and s.busy == 0
            ]
            for s in stale:
                self._sessions.pop(s.id)
        for s in stale:
            shut(s)
        return [s.id for s in stale]

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            shut(s)


def shut(s: Session) -> None:
    """Close ``s``'s environment after the work queued on its worker (a step in flight
    finishes before its workspace goes), then stop the worker."""
    s.worker.submit(s.env.close).result()
    s.worker.shutdown(wait=True)
