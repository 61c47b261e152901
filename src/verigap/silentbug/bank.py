"""The bug bank: a YAML registry of patches, validated with pydantic, and its checker.

Adding a bug is writing a patch under ``bugs/patches/`` and an entry in ``bugs/registry.yaml``.
``check_bug`` proves each entry is usable: the patch applies to the pristine file, the result
parses, and the ground-truth lines lie inside the pristine file.
"""

from __future__ import annotations

import ast
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verigap.errors import ConfigError
from verigap.silentbug.patching import PatchError, apply_unified_diff, parse_unified_diff
from verigap.silentbug.substrate import SUBSTRATES, Mechanism, SubstrateName, pristine_files

BugClass = Literal["wrong_line", "omission", "interaction", "statistical"]
GATED = ("omission", "interaction")
"""classes whose 'mechanism' (if named) must have been shown load-bearing by the ablation"""
Component = Literal[
    "action_sampling",
    "rollout_storage",
    "bootstrapping",
    "advantage_estimation",
    "advantage_normalization",
    "policy_loss",
    "value_loss",
    "entropy_bonus",
    "gradient_clipping",
    "optimizer",
    "lr_schedule",
    "minibatching",
]
MetricName = Literal[
    "episode_return",
    "episode_length",
    "value_loss",
    "policy_loss",
    "entropy",
    "old_approx_kl",
    "approx_kl",
    "clipfrac",
    "explained_variance",
    "learning_rate",
    "grad_norm",
    "sps",
]


class Bug(BaseModel):
    """One registry entry. ``class`` is spelled ``bug_class`` in Python."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="unique, snake_case")
    substrate: SubstrateName
    file: str = Field(description="path inside the substrates package, e.g. ppo_single.py")
    bug_class: BugClass = Field(alias="class")
    component: Component
    acceptable_components: list[Component] = Field(
        default_factory=list,
        description="other components the symptom is equally consistent "
        "with (seed 003: one frozen policy, several explanations); scored as the set match",
    )
    split: Literal["train", "test"] = Field(
        description="train/test split by mechanism: every bug of one mechanism shares it"
    )
    mechanism: Mechanism | None = Field(
        default=None,
        description="the ablated mechanism the bug removes (required for omission "
        "bugs) or defeats (optional for interaction bugs); calibration refuses the bug unless "
        "the ablation showed that mechanism load-bearing on its substrate",
    )
    patch: str = Field(pattern=r"^[A-Za-z0-9_.-]+\.diff$", description="file under bugs/patches/")
    ground_truth_lines: list[int] = Field(min_length=1, description="1-based, pristine file")
    symptom: str = Field(min_length=1)
    description: str = Field(min_length=1)
    diagnostic_metrics: list[MetricName] = Field(min_length=1)

    @field_validator("ground_truth_lines")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(n < 1 for n in v):
            raise ValueError("line numbers are 1-based and must be >= 1")
        return v

    @model_validator(mode="after")
    def _omission_names_mechanism(self) -> Bug:
        if self.bug_class == "omission" and self.mechanism is None:
            raise ValueError(
                "an omission bug must name the 'mechanism' it removes, so "
                "calibration can check the ablation showed it load-bearing"
            )
        if self.mechanism is not None:
            if self.bug_class not in GATED:
                raise ValueError(
                    f"'mechanism' gates only {' and '.join(GATED)} bugs; a "
                    f"{self.bug_class} bug is judged by its own runs: drop it"
                )
            if self.mechanism not in SUBSTRATES[self.substrate].ablations:
                raise ValueError(
                    f"substrate {self.substrate!r} has no ablation for "
                    f"{self.mechanism!r}; put the bug on a modular substrate"
                )
        return self


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bugs: list[Bug]

    @model_validator(mode="after")
    def _unique_ids(self) -> Registry:
        seen: set[str] = set()
        for bug in self.bugs:
            if bug.id in seen:
                raise ValueError(f"duplicate bug id {bug.id!r}")
            seen.add(bug.id)
        return self

    def get(self, bug_id: str) -> Bug:
        for bug in self.bugs:
            if bug.id == bug_id:
                return bug
        raise ConfigError(f"no bug {bug_id!r}; known: {', '.join(b.id for b in self.bugs)}")


def bugs_dir() -> Path:
    return Path(str(resources.files("verigap.silentbug") / "bugs"))


def _field_help(info: Any) -> str:
    """The field's description and, for a closed set, the values it takes."""
    args = [a for a in get_args(info.annotation) if a is not type(None)]
    choices = [v for a in args for v in (get_args(a) or ())] or list(get_args(info.annotation))
    text = info.description or ""
    if choices and all(isinstance(c, str) for c in choices):
        text += f"{'; ' if text else ''}one of {', '.join(map(str, choices))}"
    return text or "see docs/silentbug.md#adding-a-bug"


def _describe(err: ValidationError, data: object) -> str:
    lines = []
    for e in err.errors():
        loc = list(e["loc"])
        where = "registry"
        if len(loc) >= 2 and loc[0] == "bugs" and isinstance(loc[1], int):
            entries = data.get("bugs", []) if isinstance(data, dict) else []
            entry = entries[loc[1]] if loc[1] < len(entries) else {}
            bug_id = entry.get("id", "?") if isinstance(entry, dict) else "?"
            where = f"bug #{loc[1]} (id {bug_id!r})"
            loc = loc[2:]
        field = ".".join(str(p) for p in loc) or "(entry)"
        msg = e["msg"]
        if e["type"] == "missing" and len(loc) == 1:  # say what the field is and what it takes
            name = str(loc[0])
            info = Bug.model_fields.get(name) or next(
                (f for f in Bug.model_fields.values() if f.alias == name), None
            )
            if info is not None:
                msg = f"required, add it: {_field_help(info)}"
        lines.append(f"{where}: field {field!r}: {msg}")
    return "; ".join(lines)


def parse_registry(text: str, source: str = "registry.yaml") -> Registry:
    """Validate registry YAML; errors name the entry and the field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML ({e})") from e
    try:
        return Registry.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {_describe(e, data)}") from None


def load_registry(path: Path | None = None) -> Registry:
    path = path or bugs_dir() / "registry.yaml"
    return parse_registry(path.read_text(), str(path))


def patch_text(bug: Bug, patches: Path | None = None) -> str:
    path = (patches or bugs_dir() / "patches") / bug.patch
    if not path.is_file():
        raise ConfigError(f"bug {bug.id!r}: field 'patch': {path} does not exist")
    return path.read_text()


def broken_files(
    bug: Bug, pristine: dict[str, str] | None = None, patches: Path | None = None
) -> dict[str, str]:
    """The substrates package with this bug's patch applied."""
    files = dict(pristine or pristine_files())
    diff = patch_text(bug, patches)
    target, _ = parse_unified_diff(diff)
    if target != bug.file:
        raise ConfigError(
            f"bug {bug.id!r}: field 'file' is {bug.file!r} but the patch targets {target!r}"
        )
    if bug.file not in files:
        raise ConfigError(f"bug {bug.id!r}: field 'file': no {bug.file!r} in the substrates")
    try:
        files[bug.file] = apply_unified_diff(files[bug.file], diff)
    except PatchError as e:
        raise ConfigError(f"bug {bug.id!r}: field 'patch': {e}") from None
    return files


def changed_lines(bug: Bug, patches: Path | None = None) -> set[int]:
    """Lines of the PRISTINE file the patch removes or replaces, or, for a pure insertion,
    the lines either side of it: where ``ground_truth_lines`` must lie."""
    _, hunks = parse_unified_diff(patch_text(bug, patches))
    out: set[int] = set()
    for h in hunks:
        line = h.old_start if h.old else h.old_start + 1
        replacing = False  # '+' lines right after '-' lines replace them; no neighbours
        for ln in h.lines:
            if ln[:1] == " ":
                line, replacing = line + 1, False
            elif ln[:1] == "-":
                out.add(line)
                line, replacing = line + 1, True
            elif ln[:1] == "+" and not replacing:
                out.update({max(1, line - 1), line})
    return out


def check_bug(
    bug: Bug, pristine: dict[str, str] | None = None, patches: Path | None = None
) -> list[str]:
    """Problems with one entry (empty when it is usable)."""
    pristine = pristine or pristine_files()
    try:
        files = broken_files(bug, pristine, patches)
    except ConfigError as e:
        return [str(e)]
    problems = []
    n_lines = len(pristine[bug.file].splitlines())
    changed = changed_lines(bug, patches)
    off = sorted(set(bug.ground_truth_lines) - changed)
    if off:
        problems.append(
            f"bug {bug.id!r}: field 'ground_truth_lines': {off} are not lines the "
            f"patch changes (it changes {sorted(changed)} of the pristine file)"
        )
    for n in bug.ground_truth_lines:
        if n > n_lines:
            problems.append(
                f"bug {bug.id!r}: field 'ground_truth_lines': {n} is past the end "
                f"of {bug.file} ({n_lines} lines)"
            )
    if files[bug.file] == pristine[bug.file]:
        problems.append(f"bug {bug.id!r}: field 'patch': the patch changes nothing")
    try:
        ast.parse(files[bug.file])
    except SyntaxError as e:
        problems.append(f"bug {bug.id!r}: field 'patch': patched {bug.file} does not parse ({e})")
    return problems
