"""The bug bank: every patch applies and parses, and bad entries get errors naming the field."""

import ast

import pytest
import yaml

from verigap.errors import ConfigError
from verigap.silentbug.bank import broken_files, check_bug, load_registry, parse_registry
from verigap.silentbug.patching import PatchError, apply_unified_diff
from verigap.silentbug.substrate import SUBSTRATES, pristine_files

REGISTRY = load_registry()
PRISTINE = pristine_files()


@pytest.mark.parametrize("bug", REGISTRY.bugs, ids=lambda b: b.id)
def test_every_patch_applies_parses_and_its_lines_are_in_range(bug):
    assert check_bug(bug, PRISTINE) == []
    files = broken_files(bug, PRISTINE)
    ast.parse(files[bug.file])
    assert all(1 <= n <= len(PRISTINE[bug.file].splitlines()) for n in bug.ground_truth_lines)
    # the patch touches only its file
    assert {k for k in files if files[k] != PRISTINE[k]} == {bug.file}


def test_bank_covers_every_class_and_both_tasks():
    assert len(REGISTRY.bugs) >= 10
    assert {b.bug_class for b in REGISTRY.bugs} == {
        "wrong_line",
        "omission",
        "interaction",
        "statistical",
    }
    envs = {SUBSTRATES[b.substrate].config["env_id"] for b in REGISTRY.bugs}
    assert envs == {"CartPole-v1", "Acrobot-v1"}
    recomputed = {b.substrate for b in REGISTRY.bugs if "recomputed_old_logprob" in b.id}
    assert {"cartpole_single", "cartpole_modular"} <= recomputed


def _entry(**changes):
    good = REGISTRY.bugs[0].model_dump(by_alias=True)
    good.update(changes)
    return {"bugs": [{k: v for k, v in good.items() if v is not None}]}


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"component": "vibes"}, "component"),
        ({"class": "typo"}, "class"),
        ({"substrate": "mujoco"}, "substrate"),
        ({"ground_truth_lines": []}, "ground_truth_lines"),
        ({"ground_truth_lines": [0]}, "ground_truth_lines"),
        ({"diagnostic_metrics": ["vibes"]}, "diagnostic_metrics.0"),
        ({"id": "Bad Id"}, "id"),
        ({"symptom": None}, "symptom"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_malformed_entry_error_names_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        parse_registry(yaml.safe_dump(_entry(**changes)), "test.yaml")
    msg = str(err.value)
    assert f"field '{field}'" in msg
    assert "bug #0 (id " in msg and "test.yaml" in msg


@pytest.mark.parametrize(
    "changes, field, fix",
    [
        ({"split": None}, "split", "required, add it: "),
        ({"split": "dev"}, "split", "'train' or 'test'"),
        ({"ground_truth_lines": None}, "ground_truth_lines", "required, add it: "),
        ({"patch": None}, "patch", "required, add it: "),
    ],
)
def test_malformed_entry_is_one_line_naming_the_field_and_the_fix(changes, field, fix):
    """What a person adding a bug sees: one line, the entry, the field, and what to write."""
    with pytest.raises(ConfigError) as err:
        parse_registry(yaml.safe_dump(_entry(**changes)), "registry.yaml")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("registry.yaml: bug #0 (id ")
    assert f"field '{field}': " in msg and fix in msg
    if fix.startswith("required"):  # the help says what the field takes, not just its name
        assert len(msg.split(fix, 1)[1]) > 10


def test_omission_without_mechanism_is_refused_with_a_reason():
    entry = _entry(**{"class": "omission", "mechanism": None})
    with pytest.raises(ConfigError, match="mechanism"):
        parse_registry(yaml.safe_dump(entry))
    entry = _entry(
        **{"class": "omission", "mechanism": "grad_clip", "substrate": "cartpole_single"}
    )
    with pytest.raises(ConfigError, match="no ablation"):
        parse_registry(yaml.safe_dump(entry))


def test_duplicate_ids_and_bad_yaml():
    entry = _entry()
    entry["bugs"] *= 2
    with pytest.raises(ConfigError, match="duplicate"):
        parse_registry(yaml.safe_dump(entry))
    with pytest.raises(ConfigError, match="YAML"):
        parse_registry("bugs: [")


def test_patch_whose_context_changed_is_reported(tmp_path):
    bug = REGISTRY.bugs[0]
    changed = dict(PRISTINE)
    changed[bug.file] = changed[bug.file].replace("logratio", "log_ratio")
    problems = check_bug(bug, changed)
    assert problems and "does not match" in problems[0] and "'patch'" in problems[0]


def test_apply_unified_diff_round_trip_and_mismatch():
    original = "a\nb\nc\nd\n"
    diff = "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    assert apply_unified_diff(original, diff) == "a\nB\nc\nd\n"
    with pytest.raises(PatchError, match="does not match"):
        apply_unified_diff("a\nx\nc\n", diff)
    with pytest.raises(PatchError, match="not a unified diff"):
        apply_unified_diff(original, "hello")


def test_cli_list_checks_every_patch():
    import json

    from typer.testing import CliRunner

    from verigap.cli import app

    result = CliRunner().invoke(app, ["silentbug", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == len(REGISTRY.bugs) and all(not r["problems"] for r in rows)
