"""Sessions: one served environment each, with a budget, an idle timeout and a lock.

The manager owns every session of one server process. Each session has its own directory under
the server's root (its workspaces); finished episodes' full verdicts go to the server's
``verdicts.jsonl``; a session that sits idle past
``idle_s`` is closed the next time anyone touches the manager, or by the app's reaper. A new
process removes the session directories an earlier process left behind, so a restart never
serves a half-finished episode.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verigap.errors import ConfigError, VerigapError
from verigap.server._envs import (
    Limits,
    PatchWorldConfig,
    PatchWorldServed,
    RepoConfig,
    RepoServed,
    ServedEnv,
    SilentBugConfig,
    SilentBugServed,
    parse_options,
)


class SessionNotFound(VerigapError):
    pass


class TooManySessions(VerigapError):
    pass


class ServerConfig(BaseModel):
    """Everything an operator sets when starting ``verigap serve``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    root: Path = Field(Path("runs/server"), description="session workspaces and verdicts")
    token: str | None = Field(None, description="bearer token every request must carry")
    max_sessions: int = Field(8, ge=1, description="open sessions at once")
    idle_s: float = Field(600.0, gt=0, description="close a session untouched this long")
    max_steps: int = Field(200, ge=1, description="tool calls per episode before it is graded")
    episode_wall_s: float = Field(1800.0, gt=0, description="wall-clock seconds per episode")
    command_timeout_s: float = Field(120.0, gt=0, description="per tool command")
    backend: str = Field("bwrap", description="sandbox backend: bwrap, or unsafe for tests")
    tasks: dict[str, Path] = Field(default_factory=dict, description="repo task id -> task file")
    reveal_truth: bool = Field(False, description="send full verdicts (truth included)")
    silentbug_grader: Callable[..., Any] | None = Field(
        None, description="(EpisodeRecord) -> Verdict; default: the silent-bug benchmark's "
        "scorer on the calibration seeds (verigap.server.SilentBugGrader)")

    @classmethod
    def with_tasks_from(cls, tasks_dir: Path | None, **kw: Any) -> ServerConfig:
        """Serve every task file in ``tasks_dir`` (as written by ``verigap repos make-tasks``)."""
        tasks: dict[str, Path] = {}
        if tasks_dir is not None:
            from verigap.repos.tasks import RepoTask

            files = sorted(f for f in Path(tasks_dir).glob("*.json") if f.name != "index.json")
            if not files:
                raise ConfigError(f"--tasks {tasks_dir}: no task files; run "
                                  "`verigap repos make-tasks` first")
            tasks = {RepoTask.load(f).task_id: f for f in files}
        return cls(tasks=tasks, **kw)


class SessionBudget(BaseModel):
    """What a client may ask for at session creation: at most the server's budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int | None = Field(None, ge=1)
    wall_s: float | None = Field(None, gt=0)


@dataclass
class Session:
    id: str
    env: ServedEnv
    last_used: float
    episode_id: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


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
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, env: str, config: dict[str, Any]) -> Session:
        self.reap()
        c = self.config
        budget_keys = {"max_steps", "wall_s"}
        budget = parse_options(SessionBudget, {k: v for k, v in config.items() if k in budget_keys},
                               "session config")
        env_config = {k: v for k, v in config.items() if k not in budget_keys}
        limits = Limits(min(budget.max_steps or c.max_steps, c.max_steps),
                        min(budget.wall_s or c.episode_wall_s, c.episode_wall_s))
        with self._lock:
            if len(self._sessions) >= c.max_sessions:
                raise TooManySessions(f"{len(self._sessions)} sessions are open, the server's "
                                      f"limit (--max-sessions {c.max_sessions}); close one with "
                                      "DELETE /sessions/{id} or wait for an idle one to expire")
            sid = secrets.token_hex(8)
            workdir = self.root / sid
            workdir.mkdir()
        try:
            served = self._make(env, env_config, workdir, limits)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        session = Session(sid, served, self.clock())
        with self._lock:
            self._sessions[sid] = session
        return session

    def _make(self, env: str, cfg: dict[str, Any], workdir: Path, limits: Limits) -> ServedEnv:
        c = self.config
        common = dict(workdir=workdir, limits=limits, reveal_truth=c.reveal_truth)
        tool = dict(backend=c.backend, command_timeout_s=c.command_timeout_s)
        if env == "patchworld":
            return PatchWorldServed(**common, config=parse_options(
                PatchWorldConfig, cfg, "patchworld session config"))
        if env == "repo":
            return RepoServed(**common, **tool, tasks=dict(c.tasks),
                              config=parse_options(RepoConfig, cfg, "repo session config"))
        if env == "silentbug":
            return SilentBugServed(**common, **tool, grader=c.silentbug_grader,
                                   scoring_root=Path(c.root), config=parse_options(
                                       SilentBugConfig, cfg, "silentbug session config"))
        raise ConfigError(f"unknown env {env!r}; use patchworld, repo or silentbug")

    def record(self, s: Session) -> None:
        """Append the full verdicts of ``s``'s finished episode to the server's log (kept across
        sessions and restarts; written whole and fsynced, so a crash leaves only whole lines)."""
        lines = "".join(json.dumps({"session_id": s.id, "episode_id": s.episode_id,
                                    "env": s.env.name, "verdict": v}, sort_keys=True) + "\n"
                        for v in s.env.verdicts)
        with self._log_lock, self.log_path.open("a") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())

    def get(self, sid: str) -> Session:
        self.reap()
        with self._lock:
            s = self._sessions.get(sid)
        if s is None:
            raise SessionNotFound(f"no session {sid!r}: it was closed, it expired after "
                                  f"{self.config.idle_s:g} s idle, or the server restarted; "
                                  "create a new one with POST /sessions")
        s.last_used = self.clock()
        return s

    def close(self, sid: str) -> None:
        s = self.get(sid)
        with self._lock:
            self._sessions.pop(sid, None)
        with s.lock:  # let a step in flight finish before its workspace goes
            s.env.close()

    def reap(self) -> list[str]:
        """Close every session idle for longer than ``idle_s`` (and not in a step)."""
        now = self.clock()
        with self._lock:
            stale = [s for s in self._sessions.values()
                     if now - s.last_used > self.config.idle_s and not s.lock.locked()]
            for s in stale:
                self._sessions.pop(s.id)
        for s in stale:
            s.env.close()
        return [s.id for s in stale]

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            s.env.close()
