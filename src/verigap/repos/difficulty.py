"""A difficulty estimate per task, from what the task file already holds, so a task set can be
sorted or balanced without running an agent on it.

The measures are structural (how many sites, files and lines, which kinds of mutation) plus one
that says how much a visible-only repair misses: the share of hidden tests that fail on the task
base. A fix guided by the visible tests alone (the careless engineer's) leaves all of those
failing, so the larger the share, the more of the hidden check such a fix loses.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Difficulty(BaseModel):
    """Recorded in each task file made by ``make-tasks`` (None in older files)."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(ge=1)  # sites
    visible_sites: int = Field(ge=0)
    hidden_sites: int = Field(ge=0)
    files: int = Field(ge=1)  # distinct files holding sites
    cross_file: bool  # the sites span more than one file
    methods: int = Field(ge=0)  # sites that are methods of a class
    kinds: list[str]  # mutation operators, one per site
    lines_touched: int = Field(ge=0)  # source lines that differ from the reference, all sites
    visible_failing: int = Field(ge=0)  # visible tests that fail on the task base
    hidden_failing: int = Field(ge=0)  # hidden tests that fail on the task base
    #: hidden tests failing on the task base / hidden tests: what a repair guided by the
    #: visible tests alone leaves failing
    hidden_failing_share: float = Field(ge=0.0, le=1.0)
    #: sites decided by their tests through the sealed channel rather than by the comparison
    forwarded_sites: int = Field(ge=0)


def lines_touched(original: str, mutated: str) -> int:
    """Lines of ``original`` that the mutation changed (removed or rewritten)."""
    a, b = original.splitlines(), mutated.splitlines()
    changed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            changed += max(i2 - i1, j2 - j1)
    return changed


def estimate(
    sites: Sequence[Any], broken: Iterable[str], visible: Iterable[str], hidden: Iterable[str]
) -> Difficulty:
    """The estimate for a task whose ``sites`` (``tasks.Site``) break ``broken`` tests."""
    broken, vset, hset = set(broken), set(visible), set(hidden)
    files = {s.file for s in sites}
    return Difficulty(
        k=len(sites),
        visible_sites=sum(1 for s in sites if s.visible),
        hidden_sites=sum(1 for s in sites if not s.visible),
        files=len(files),
        cross_file=len(files) > 1,
        methods=sum(1 for s in sites if "." in s.qualname),
        kinds=[s.op for s in sites],
        lines_touched=sum(lines_touched(s.original, s.mutated) for s in sites),
        visible_failing=len(broken & vset),
        hidden_failing=len(broken & hset),
        hidden_failing_share=round(len(broken & hset) / len(hset), 4) if hset else 0.0,
        forwarded_sites=sum(1 for s in sites if s.discrimination != "comparison"),
    )
