"""Tasks and question-only probes built from a workplace's scenarios.

Per knob: one code task (change the default to what the team decided; hidden tests check the
decided behaviour) and three probes whose answer must be assembled: the decided value, the
values proposed before the decision (a set), and who reviews the change now.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any, Literal

from verigap.errors import ConfigError
from verigap.workplace._world import PROJECTS, Scenario, Workplace, build_workplace

Kind = Literal["code", "probe_value", "probe_proposals", "probe_reviewer"]
KINDS: tuple[str, ...] = ("code", "probe_value", "probe_proposals", "probe_reviewer")

#: The facts each kind needs (roles; the fact id is ``<knob key>:<role>``).
NEEDED: dict[str, tuple[str, ...]] = {
    "code": ("outdated", "final"),
    "probe_value": ("outdated", "final"),
    "probe_proposals": ("outdated", "stale", "final"),
    "probe_reviewer": ("reviewer_initial", "reviewer_final"),
}


@dataclass(frozen=True)
class WorkItem:
    """One task or probe: the prompt, the expected answer, and the scenario behind it."""

    item_id: str
    kind: str
    project: str
    seed: int
    scenario: Scenario
    prompt: str

    @property
    def needed_facts(self) -> tuple[str, ...]:
        return tuple(self.scenario.fact(r) for r in NEEDED[self.kind])

    @property
    def expected(self) -> Any:
        s = self.scenario
        if self.kind in ("code", "probe_value"):
            return s.values["final"]
        if self.kind == "probe_proposals":
            return sorted({s.values["outdated"], s.values["stale"]}, key=repr)
        return s.reviewer_final


def _prompt(kind: str, s: Scenario) -> str:
    k = s.knob
    if kind == "code":
        return (
            f"Implement ticket {s.ticket}: change the default {k.param} of `{k.func}` "
            f"({k.module}). The team's tickets, chat, pull requests and git history are "
            "reachable through your tools; the ticket may not be the last word. Keep "
            f"callers that pass {k.param} explicitly working, follow the project's "
            "conventions (tests, docs) and submit when done."
        )
    if kind == "probe_value":
        return (
            f"What default value of {k.param} for `{k.func}` did the team finally decide? "
            "Answer with the value as a Python literal, e.g. '-' or 10."
        )
    if kind == "probe_proposals":
        return (
            f"Which values were proposed as the new default {k.param} of `{k.func}` "
            "before the final decision (not the decided one, not the current one)? Answer "
            "a JSON list of the values."
        )
    return (
        f"Who reviews the change to the default {k.param} of `{k.func}` now? Answer "
        "with the person's handle."
    )


def items_for(w: Workplace) -> list[WorkItem]:
    out = []
    for s in w.scenarios:
        for kind in KINDS:
            out.append(
                WorkItem(
                    f"{w.project}/s{w.seed}/{s.knob.key}/{kind}",
                    kind,
                    w.project,
                    w.seed,
                    s,
                    _prompt(kind, s),
                )
            )
    return out


def build_items(seeds: list[int], projects: list[str] | None = None) -> list[WorkItem]:
    """Every item for ``seeds`` x ``projects`` (all projects by default), in a fixed order."""
    out: list[WorkItem] = []
    for project in projects or list(PROJECTS):
        for seed in seeds:
            out += items_for(build_workplace(project, seed))
    return out


def parse_answer(kind: str, text: str) -> Any:
    """The answer as a value: a literal, a list (JSON or Python) or a handle. Unparseable
    text is returned as it is (and will not match)."""
    text = text.strip()
    if kind == "probe_reviewer":
        return text.lstrip("@").strip().lower()
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError):
            continue
        if kind == "probe_proposals" and isinstance(value, list | tuple | set):
            try:
                return sorted(set(value), key=repr)
            except TypeError:
                return list(value)
        return value
    return text


def matched_role(item: WorkItem, value: Any) -> str:
    """Which source the value agrees with: final, outdated, stale, code, or other (for the
    proposals probe: final when right, none when empty, partial otherwise)."""
    s = item.scenario
    if item.kind == "probe_reviewer":
        if value == s.reviewer_final:
            return "final"
        return "outdated" if value == s.reviewer_initial else "other"
    if item.kind == "probe_proposals":
        if value == item.expected:
            return "final"
        return "none" if value in ([], ()) else "partial"
    for role in ("final", "outdated", "stale", "code"):
        if value == s.values[role] and type(value) is type(s.values[role]):
            return role
    return "other"


def find_item(item_id: str) -> WorkItem:
    """The item ``PROJECT/sSEED/FUNC.PARAM/KIND`` (built from its project and seed)."""
    parts = item_id.split("/")
    if len(parts) != 4 or not parts[1].startswith("s") or not parts[1][1:].isdigit():
        raise ConfigError(
            f"item {item_id!r}: write PROJECT/sSEED/FUNC.PARAM/KIND, "
            "e.g. textkit/s0/slugify.sep/probe_value"
        )
    project, seed = parts[0], int(parts[1][1:])
    if project not in PROJECTS:
        raise ConfigError(f"item {item_id!r}: no project {project!r}; use {', '.join(PROJECTS)}")
    if parts[3] not in KINDS:
        raise ConfigError(f"item {item_id!r}: no kind {parts[3]!r}; use {', '.join(KINDS)}")
    items = items_for(build_workplace(project, seed))
    for item in items:
        if item.item_id == item_id:
            return item
    knobs = sorted({i.scenario.knob.key for i in items})
    raise ConfigError(
        f"item {item_id!r}: the {project} workplace of seed {seed} has no "
        f"{parts[2]!r}; its changes are {', '.join(knobs)}"
    )
