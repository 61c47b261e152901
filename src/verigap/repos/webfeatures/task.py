"""The feature task record: a commit that added behaviour with its tests, turned into a task.

A feature task is not a set of broken functions (the bug-fix schema in ``repos/schema.py``): the
agent starts from the commit's parent and must add behaviour that spans files of any kind (a
model and its migration, an HTTP route, a template). So the record names the two commits in the
project's bundle instead of holding per-function sites, and holds the hidden tests as whole
files: the commit's own test files and, for features a user sees in a page, a browser check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verigap.errors import ConfigError
from verigap.runs import write_json_atomic

Layer = Literal["database", "http", "frontend"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FeatureTask(_Strict):
    """One validated feature task. Load with ``FeatureTask.load(path)``."""

    schema_version: Literal[1] = 1
    task_id: str
    project: str  # the bundle's name under webfeatures/data (without .bundle)
    base: str  # full sha of the parent: the agent's starting tree (no git history)
    reference: str  # full sha of the feature commit: the real change
    subject: str  # the commit's subject line (for humans; never shown to the agent)
    ticket: str  # what a product owner would write: wanted behaviour, never the code
    layers: list[Layer]  # the app layers the real change touches
    changed_files: list[str]  # non-test files the real change adds, edits or deletes
    #: test file -> its text at the reference: the commit's own tests, restored over the
    #: workspace when grading (a browser check is one more such file)
    hidden_files: dict[str, str] = Field(min_length=1)
    browser_check: str | None = None  # the hidden file that drives a browser, if any
    fail_to_pass: list[str] = Field(min_length=1)  # fail at the base, pass at the reference
    pass_to_pass: list[str]  # pass at both: behaviour the feature must keep
    #: the base's own tests the agent can run (its versions of the touched test files)
    visible_tests: list[str]

    @property
    def hidden_tests(self) -> list[str]:
        return sorted(set(self.fail_to_pass) | set(self.pass_to_pass))

    @classmethod
    def load(cls, path: Path) -> FeatureTask:
        try:
            return cls.model_validate_json(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"feature task {path} does not exist") from None
        except (ValidationError, json.JSONDecodeError) as e:
            raise ConfigError(
                f"{path}: not a feature task ({str(e).splitlines()[0]}); rebuild it with "
                "`python -m verigap.repos.webfeatures build`"
            ) from None

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.model_dump())
