"""The repo task schema: what a task file holds (sites, equivalence inputs, the source it was
made from), apart from the pipeline that makes task files (:mod:`verigap.repos.tasks`), so
the graders, tickets and episode loops read tasks without importing the make-tasks pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verigap.errors import ConfigError
from verigap.repos import mutate
from verigap.repos.difficulty import Difficulty
from verigap.runs import write_json_atomic


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Site(_Strict, mutate.MutationRecord):
    """One broken place: a mutation inside one function."""

    site_id: str
    file: str
    qualname: str
    op: str
    index: int = Field(ge=0)
    visible: bool  # reached by the visible tests
    fail_to_pass: list[str] = Field(min_length=1)
    original: str  # the function as it was (for the oracle and for humans)
    mutated: str
    # no usable equivalence input: only in-process test outcomes speak for this site (kept only
    # when the task set opted in with allow_tests_only; every verdict lists such sites)
    tests_only: bool = False
    #: what tells this site's mutation apart out of the candidate's process, checked when the
    #: task is built (:func:`discriminated`): "comparison", its equivalence inputs (the tree with
    #: this mutation alone mismatches the reference on one of them); "forwarded", they do not
    #: (or it has none), so its ``fail_to_pass`` tests run through the sealed channel
    #: (``repos/forward.py``) and v2 needs both; "in_process", neither, kept only under
    #: ``allow_tests_only`` and marked ``tests_only``; None: a task file made before the check
    discrimination: Literal["comparison", "forwarded", "in_process"] | None = None


class EquivInput(_Strict):
    """One pickled call (args, kwargs) of a mutated function, from the suite or generated."""

    id: int
    target: str  # "file::qualname"
    module: str
    qualname: str
    blob: str  # base64 pickle of (args, kwargs)
    generated: bool = False
    #: how the test that made the call reached it, outermost frame first (test function ...
    #: direct caller), each ``[kind, file, name, qualname, line]`` (``kind`` "tree": ``file``
    #: relative to the tree); the comparison's agent context calls through a replay of it.
    #: None in task files made before it was recorded: called from the runner's frame there.
    caller: list[tuple[str, str, str, str, int]] | None = None
    #: the node id of the test that made the call (pytest's ``PYTEST_CURRENT_TEST`` there is
    #: "<test> (call)", and the agent context sets it so); None as for ``caller``
    test: str | None = None


class SourceRef(_Strict):
    spec: str
    key: str  # prepared environment (cache) key
    tree_sha256: str
    env: Literal["venv", "current"] = "venv"
    test_deps: list[str] = []


#: what a task asks for: ``bugfix`` (a mutation or a mined fix: make broken behaviour right) or
#: ``feature`` (mined from a commit that adds behaviour with its tests: build what is missing)
TaskKind = Literal["bugfix", "feature"]


class RepoTask(_Strict):
    """A repo task (a bug fix or a feature). Validate with ``RepoTask.load(path)``."""

    schema_version: Literal[1] = 1
    task_id: str
    kind: TaskKind = "bugfix"
    source: SourceRef
    seed: int
    sites: list[Site] = Field(min_length=1)
    files_sha256: dict[str, str]  # mutated file -> sha256 of its text in the task base
    visible_tests: list[str] = Field(min_length=1)
    hidden_tests: list[str] = Field(min_length=1)
    fail_to_pass: list[str]  # tests that fail on the task base and pass on the reference
    visible_test_files: list[str]
    removed_units: dict[str, list[str]]  # visible test file -> hidden test units cut from it
    source_paths: list[str]  # what an agent may edit (package dirs / modules)
    equivalence: list[EquivInput]
    prompt: str
    #: file -> its whole text in the task base, for sites that no mutation operator makes (bugs
    #: mined from git history: the fix commit's parent version of a source file)
    base_files: dict[str, str] = {}
    origin: dict[str, str] = {}  # where a mined task came from (repository, commit, subject)
    difficulty: Difficulty | None = None  # made by make-tasks; None in older or mined files

    @property
    def expected_tests(self) -> list[str]:
        return sorted(set(self.visible_tests) | set(self.hidden_tests))

    @classmethod
    def load(cls, path: Path) -> RepoTask:
        try:
            return cls.model_validate_json(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"task file {path} does not exist") from None
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise ConfigError(
                f"{path}: field {loc!r}: {err['msg']}; regenerate the task with "
                "`verigap repos make-tasks` or fix that field"
            ) from None

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.model_dump())
