"""Tools: a name, a description, a pydantic argument model and a function returning text.

A tool's JSON Schema comes from its argument model (``extra="forbid"``), so every
provider sees the same schema and bad arguments are caught before the function runs.
A family adds its own tools (run_tests, run_training, get_metrics, ...) the same way; the
worked example is in docs/sandbox_and_agents.md and runs as
tests/agents/test_agent_family_tool.py.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from verigap.agents._types import ToolSpec
from verigap.sandbox import ExecResult, PathOutsideWorkspace, Sandbox

MAX_LISTED = 500
MAX_READ_LINES = 2000
MAX_READ_CHARS = 60_000
MAX_READ_BYTES = 10 * 1024 * 1024
MAX_WALKED = 20_000


class ToolError(Exception):
    """A tool refusing a call; its message is shown to the model as the observation."""


@dataclass(frozen=True)
class ToolOutput:
    """A tool result with images: ``text`` is the observation, ``images`` are PNG paths on
    the host. Model clients attach the images (OpenAI and Anthropic image blocks); the
    transcript and a scripted client see the paths in the message's ``images``."""

    text: str
    images: tuple[str, ...] = ()


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


Ending = Literal["submit", "impossible"]


@dataclass(frozen=True)
class Tool:
    """A callable the model may use. ``ends_episode`` marks submit / report_impossible."""

    name: str
    description: str
    args_model: type[ToolArgs]
    fn: Callable[[Any], str | ToolOutput]
    ends_episode: Ending | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments, without pydantic's titles (provider-neutral)."""
        return _strip_titles(self.args_model.model_json_schema())

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: _strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


# ---- the budget as tools see it ----------------------------------------------------------

_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "verigap_command_deadline", default=None
)


def command_timeout(default: float = 60.0) -> float:
    """Seconds a command started now may run: the episode's per-command timeout, clipped to
    the wall-clock time the episode has left. Outside an episode, ``default``."""
    current = _deadline.get()
    if current is None:
        return default
    per_command, episode_deadline = current
    return max(0.1, min(per_command, episode_deadline - time.monotonic()))


def set_command_budget(per_command: float, episode_deadline: float) -> contextvars.Token:
    """Used by the loop; families never call this."""
    return _deadline.set((per_command, episode_deadline))


def reset_command_budget(token: contextvars.Token) -> None:
    """Used by the loop when the episode ends."""
    _deadline.reset(token)


def format_exec(result: ExecResult) -> str:
    """An ExecResult as the text a model reads."""
    head = "timed out" if result.timed_out else f"exit code {result.returncode}"
    lines = [f"{head} ({result.wall_s:.1f}s)"]
    if result.reason:
        lines.append(f"note: {result.reason}")
    lines += [
        "--- stdout ---",
        result.stdout.rstrip("\n"),
        "--- stderr ---",
        result.stderr.rstrip("\n"),
    ]
    return "\n".join(lines)


# ---- the standard tools -------------------------------------------------------------------


class ListFilesArgs(ToolArgs):
    path: str = Field(".", description="Directory to list, relative to the workspace.")


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File to read, relative to the workspace.")
    start_line: int | None = Field(None, ge=1, description="First line to show (1-based).")
    end_line: int | None = Field(None, ge=1, description="Last line to show (inclusive).")


class EditFileArgs(ToolArgs):
    path: str = Field(description="File to edit, relative to the workspace.")
    old: str = Field(description="Exact text to replace; must occur exactly once in the file.")
    new: str = Field(description="Replacement text.")


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File to create or overwrite, relative to the workspace.")
    content: str = Field(description="The complete new content of the file.")


class RunArgs(ToolArgs):
    command: str = Field(description="Shell command, run with /bin/sh in the workspace.")
    timeout_s: float | None = Field(
        None, gt=0, description="Seconds before it is killed (capped by the episode budget)."
    )


class SubmitArgs(ToolArgs):
    summary: str = Field("", description="What you changed and why.")


class ReportImpossibleArgs(ToolArgs):
    reason: str = Field(min_length=1, description="Why the task cannot be done as specified.")


class _WorkspaceTools:
    """The standard tools' implementations, bound to one sandbox (one method per tool)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def host(self, rel: str) -> Path:
        try:
            return self.sandbox.path(rel)
        except PathOutsideWorkspace as exc:
            raise ToolError(str(exc)) from None

    def existing_file(self, rel: str) -> Path:
        p = self.host(rel)
        if p.is_dir():
            raise ToolError(f"{rel!r} is a directory; use list_files")
        if p.exists() and not p.is_file():
            raise ToolError(f"{rel!r} is not a regular file")
        if not p.is_file():
            raise ToolError(f"{rel!r} does not exist; use list_files to see what does")
        return p

    def list_files(self, a: ListFilesArgs) -> str:
        base = self.host(a.path)
        if not base.is_dir():
            raise ToolError(f"{a.path!r} is not a directory")
        entries: list[str] = []
        stopped = False
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            rel_dir = os.path.relpath(dirpath, self.sandbox.root)
            entries += [os.path.normpath(os.path.join(rel_dir, d)) + "/" for d in dirnames]
            entries += [os.path.normpath(os.path.join(rel_dir, f)) for f in filenames]
            if len(entries) > MAX_WALKED:  # a huge tree (node_modules, a dataset): stop early
                stopped = True
                break
        entries.sort()
        if not entries:
            return "(empty directory)"
        shown = entries[:MAX_LISTED]
        more = len(entries) - len(shown)
        if stopped:
            return (
                "\n".join(shown)
                + "\n[... listing stopped: too many entries; list a subdirectory ...]"
            )
        return "\n".join(shown) + (f"\n[... {more} more entries not shown ...]" if more else "")

    def read_file(self, a: ReadFileArgs) -> str:
        path = self.existing_file(a.path)
        if path.stat().st_size > MAX_READ_BYTES:
            raise ToolError(
                f"{a.path!r} is larger than 10 MB; inspect it with `run` (head, sed -n, grep)"
            )
        lines = self.sandbox.read_file(str(path)).splitlines()
        if not lines:
            return "(empty file)"
        start = a.start_line or 1
        if a.end_line is not None and a.end_line < start:
            raise ToolError(f"end_line {a.end_line} is before start_line {start}")
        if start > len(lines):
            raise ToolError(f"start_line {start} is past the end of the file ({len(lines)} lines)")
        end = min(a.end_line or len(lines), len(lines), start + MAX_READ_LINES - 1)
        body = "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(start, end + 1))
        if len(body) > MAX_READ_CHARS:
            body = body[:MAX_READ_CHARS] + "\n[... cut; read a smaller line range ...]"
        if (start, end) != (1, len(lines)):
            body += f"\n[lines {start}-{end} of {len(lines)}]"
        return body

    def edit_file(self, a: EditFileArgs) -> str:
        path = self.existing_file(a.path)
        if a.old == "":
            raise ToolError("old is empty; give the exact text to replace")
        text = self.sandbox.read_file(str(path))
        count = text.count(a.old)
        if count == 0:
            raise ToolError(f"old text not found in {a.path}; read the file and copy it exactly")
        if count > 1:
            raise ToolError(
                f"old text occurs {count} times in {a.path}; include more context to make it unique"
            )
        if a.old == a.new:
            raise ToolError("old and new are identical; nothing would change")
        self.sandbox.write_file(str(path), text.replace(a.old, a.new, 1))
        return f"edited {a.path}: replaced 1 occurrence"

    def write_file(self, a: WriteFileArgs) -> str:
        path = self.host(a.path)
        if path.is_dir():
            raise ToolError(f"{a.path!r} is a directory")
        if path.exists() and not path.is_file():
            raise ToolError(f"{a.path!r} is not a regular file")
        self.sandbox.write_file(str(path), a.content)
        return f"wrote {a.path} ({len(a.content)} characters)"

    def run(self, a: RunArgs) -> str:
        budget = command_timeout(self.sandbox.limits.wall_s)
        timeout = budget if a.timeout_s is None else min(a.timeout_s, budget)
        return format_exec(self.sandbox.exec(a.command, timeout=timeout))

    def submit(self, a: SubmitArgs) -> str:
        return "submitted"

    def report_impossible(self, a: ReportImpossibleArgs) -> str:
        return "reported as impossible"


def standard_tools(sandbox: Sandbox) -> list[Tool]:
    """list_files, read_file, edit_file, write_file, run, submit and report_impossible,
    all bound to ``sandbox``. Paths that leave the workspace are refused."""
    t = _WorkspaceTools(sandbox)
    list_files, read_file, edit_file, write_file = (
        t.list_files,
        t.read_file,
        t.edit_file,
        t.write_file,
    )
    run, submit, report_impossible = t.run, t.submit, t.report_impossible

    return [
        Tool(
            "list_files",
            "List files under a directory of the workspace (recursive).",
            ListFilesArgs,
            list_files,
        ),
        Tool(
            "read_file",
            "Read a text file with line numbers; optionally only lines start_line..end_line.",
            ReadFileArgs,
            read_file,
        ),
        Tool(
            "edit_file",
            "Replace one exact, unique occurrence of `old` with `new` in a file.",
            EditFileArgs,
            edit_file,
        ),
        Tool(
            "write_file",
            "Create or overwrite a file with the given content.",
            WriteFileArgs,
            write_file,
        ),
        Tool(
            "run",
            "Run a shell command in the workspace (no network). Returns exit code, stdout, stderr.",
            RunArgs,
            run,
        ),
        Tool(
            "submit", "Finish: submit the workspace as your solution.", SubmitArgs, submit, "submit"
        ),
        Tool(
            "report_impossible",
            "Finish without a solution: the task cannot be done as specified. Say why.",
            ReportImpossibleArgs,
            report_impossible,
            "impossible",
        ),
    ]
