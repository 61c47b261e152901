"""A small, strict unified-diff applier (no fuzz), so patching needs neither ``patch`` nor git."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verigap.errors import ConfigError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ConfigError):
    """A patch that is malformed or does not match the file it is meant for."""


@dataclass
class Hunk:
    old_start: int  # 1-based line in the original
    lines: list[str] = field(default_factory=list)  # with their ' ', '-', '+' prefixes

    @property
    def old(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "-")]

    @property
    def new(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "+")]


def parse_unified_diff(diff: str) -> tuple[str, list[Hunk]]:
    """(target path without its a/ b/ prefix, hunks). Exactly one file per patch."""
    target = None
    hunks: list[Hunk] = []
    for ln in diff.splitlines():
        if ln.startswith("--- "):
            if target is not None:
                raise PatchError("patch touches more than one file; a bug patches exactly one")
            continue
        if ln.startswith("+++ "):
            path = ln[4:].split("\t")[0].strip()
            target = path[2:] if path.startswith(("a/", "b/")) else path
            continue
        m = _HUNK.match(ln)
        if m:
            hunks.append(Hunk(int(m.group(1))))
        elif hunks and ln[:1] in (" ", "-", "+"):
            hunks[-1].lines.append(ln)
        elif hunks and ln == "":
            hunks[-1].lines.append(" ")
        elif ln.startswith("\\"):
            continue  # "\ No newline at end of file"
    if target is None or not hunks:
        raise PatchError("not a unified diff: expected '--- a/FILE', '+++ b/FILE' and '@@' hunks")
    return target, hunks


def apply_unified_diff(original: str, diff: str) -> str:
    """Apply ``diff`` to ``original``; every context and removed line must match exactly."""
    _, hunks = parse_unified_diff(diff)
    lines = original.splitlines()
    out: list[str] = []
    pos = 0  # index into lines of the first line not yet copied
    for h in hunks:
        start = h.old_start - 1 if h.old else h.old_start
        if lines[start : start + len(h.old)] != h.old:
            raise PatchError(
                f"hunk at line {h.old_start} does not match the file "
                "(the pristine substrate changed; regenerate the patch)"
            )
        if start < pos:
            raise PatchError(f"hunk at line {h.old_start} overlaps the previous hunk")
        out.extend(lines[pos:start])
        out.extend(h.new)
        pos = start + len(h.old)
    out.extend(lines[pos:])
    return "\n".join(out) + ("\n" if original.endswith("\n") else "")
