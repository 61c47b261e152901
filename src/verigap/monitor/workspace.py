"""The workspace a trajectory left behind, rebuilt step by step from its transcript.

A trajectory record may carry the workspace itself (``record["workspace"] = {"base": {path:
text}, "final": {path: text or null}}``, null for a deleted file): then that diff is the truth
and the transcript only adds the commands. Otherwise the change is replayed from every tool
call that can write: ``write_file``, ``edit_file`` (with or without a read before it) and the
shell writes of ``run`` calls (:mod:`verigap.monitor.shell`). Each state is kept with the step
(tool-call index) that made it, so a name can be placed at the step that introduced it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from verigap.monitor import shell

_LINE = re.compile(r"^\s*\d+\t", re.M)
_PATHS = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:py|cfg|ini|toml|txt|json|xml|pth))\b")


@dataclass
class State:
    """What is known of the workspace after some step."""

    base: dict[str, str] = field(default_factory=dict)  # text at the start, where seen
    existed: set[str] = field(default_factory=set)  # in the task base (seen, named, edited)
    now: dict[str, str | None] = field(default_factory=dict)  # written: text, None = unknown
    deleted: set[str] = field(default_factory=set)
    fragments: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # blind edits
    commands: list[str] = field(default_factory=list)
    stash: list[tuple[dict[str, str | None], set[str]]] = field(default_factory=list)
    #: files the record shows unchanged (visible tests, site files), and its source paths
    context: dict[str, str] = field(default_factory=dict)
    source_paths: list[str] | None = None

    def changed(self) -> dict[str, str | None]:
        """Paths whose text differs from the base (None: written, text unknown)."""
        return {p: t for p, t in self.now.items() if p not in self.base or t != self.base[p]}

    def copy(self) -> State:
        return State(
            dict(self.base),
            set(self.existed),
            dict(self.now),
            set(self.deleted),
            {k: list(v) for k, v in self.fragments.items()},
            list(self.commands),
            list(self.stash),
            dict(self.context),
            None if self.source_paths is None else list(self.source_paths),
        )


def tool_calls(record: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool name, arguments, result text) for every call in the conversation, in order."""
    results = {
        m.get("tool_call_id"): m.get("content") or ""
        for m in record["messages"]
        if m.get("role") == "tool"
    }
    out = []
    for m in record["messages"]:
        for c in m.get("tool_calls") or []:
            fn = c.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            out.append(
                (
                    fn.get("name", ""),
                    args if isinstance(args, dict) else {},
                    results.get(c.get("id"), ""),
                )
            )
    return out


def _mentioned(text: str) -> set[str]:
    return {m.group(1).removeprefix("./") for m in _PATHS.finditer(text or "")}


def _apply(state: State, w: shell.Write) -> None:
    if w.restore:
        if state.stash:
            now, deleted = state.stash.pop()
            state.now.update(now)
            state.deleted |= deleted
        return
    if not w.path and not w.revert:
        return  # files changed that the command does not name: nothing to replay
    if w.revert and not w.path:
        state.stash.append((dict(state.now), set(state.deleted)))
    if w.revert:
        every = w.path in ("", ".")
        for p in [
            p for p in state.now if every or p == w.path or p.startswith(w.path.rstrip("/") + "/")
        ]:
            if p in state.base:
                state.now[p] = state.base[p]
            elif p in state.existed:
                del state.now[p]
                state.fragments.pop(p, None)
            else:
                state.now.pop(p)
            state.deleted.discard(p)
        return
    if w.deleted:
        if w.path in state.existed or w.path in state.now:
            state.deleted.add(w.path)
        state.now.pop(w.path, None)
        return
    state.deleted.discard(w.path)
    state.now[w.path] = w.text


def steps(record: dict[str, Any]) -> Iterator[tuple[int, State]]:
    """The state after each tool call (its index), replayed from the transcript."""
    state = State()
    user = " ".join(
        str(m.get("content") or "") for m in record["messages"] if m.get("role") == "user"
    )
    state.existed |= _mentioned(user)
    for i, (name, args, result) in enumerate(tool_calls(record)):
        path = str(args.get("path", "")).removeprefix("./")
        failed = result.startswith("error")
        if name == "read_file" and path and not failed:
            state.existed.add(path)
            if (
                path not in state.base
                and path not in state.now
                and not re.search(r"\n\[lines \d+-\d+ of \d+\]$", result)
            ):
                text = _LINE.sub("", result) + "\n" if result != "(empty file)" else ""
                state.base[path] = text
        elif name == "write_file" and path and not failed:
            _apply(state, shell.Write(path, str(args.get("content", ""))))
        elif name == "edit_file" and path and not failed:
            state.existed.add(path)  # the tool edits existing files only
            old, new = str(args.get("old", "")), str(args.get("new", ""))
            cur = state.now.get(path, state.base.get(path))
            if cur is not None and old in cur:
                state.now[path] = cur.replace(old, new, 1)
            else:
                state.now[path] = None
                state.fragments.setdefault(path, []).append((old, new))
        elif name == "run" and "command" in args:
            cmd = str(args["command"])
            state.commands.append(cmd)
            known = {**state.base, **state.now}
            for w in shell.writes(cmd, known):
                _apply(state, w)
        if path:
            state.commands.append(path)
        state.existed |= _mentioned(result) - set(state.now)
        yield i, state


def final(record: dict[str, Any]) -> State:
    """The last state: the record's own workspace diff when it has one, else the replay."""
    last = State()
    for _, st in steps(record):
        last = st
    ws = record.get("workspace")
    if isinstance(ws, dict) and isinstance(ws.get("base"), dict):
        base = {p: t for p, t in ws["base"].items() if isinstance(t, str)}
        fin = ws.get("final") or {}
        ctx = {p: t for p, t in (ws.get("context") or {}).items() if isinstance(t, str)}
        st = State(
            base=base,
            existed=set(base) | set(ctx),
            commands=last.commands,
            context=ctx,
            source_paths=ws.get("source_paths"),
        )
        for p, t in fin.items():
            if t is None:
                st.deleted.add(p)
            elif base.get(p) != t:
                st.now[p] = t
        return st
    return last
