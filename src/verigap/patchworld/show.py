"""Readable, code-like text for one Patch World program."""

from __future__ import annotations

import numpy as np

from verigap.patchworld import rules
from verigap.patchworld.programs import FAMILIES, N_BRANCHES, Programs


def program_text(
    programs: Programs, i: int = 0, written: np.ndarray | None = None, reveal: bool = True
) -> str:
    """Program ``i`` as a function with 12 branches, broken ones marked. ``reveal`` adds the
    reference value of broken branches and the pattern family (what the agent does not see)."""
    p = programs
    lines = [f"def program(x):  # pattern: {FAMILIES[p.family[i]] if reveal else '?'}"]
    for b in range(N_BRANCHES):
        kw = "if  " if b == 0 else "elif"
        ret = f"return {p.shown[i, b]:>2d}"
        flags = ["tested" if p.tested[i, b] else "      ", "strict" if p.strict[i, b] else "      "]
        note = ""
        if p.broken[i, b]:
            note = "BROKEN"
            if reveal:
                note += f" (reference {p.reference[i, b]})"
            if written is not None and written[b] != rules.NOT_ACTED:
                note += f" -> {rules.action_name(int(written[b]))}"
        lines.append(f"    {kw} x == {b:>2d}: {ret}    # {' '.join(flags)} {note}".rstrip())
    lines.append("    raise ValueError(x)")
    return "\n".join(lines)
