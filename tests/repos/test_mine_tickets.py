"""Ticket-style prompts for mutation tasks: symptoms without saying where to look."""

from __future__ import annotations

import re

import pytest

from verigap.errors import ConfigError
from verigap.repos.tasks import make_tasks
from verigap.repos.tickets import intent, names_of, redact, symptoms, ticket_prompt

PYTEST_OUT = """\
____ test_slug ____
tests/test_text.py:9: in test_slug
    assert slugify("A b") == "a-b"
E   AssertionError: assert 'a_b' == 'a-b'
E     - a-b
E     + a_b
E    +  where 'a_b' = slugify('A b')
____ test_wrap ____
E   TypeError: wrap() got an unexpected keyword argument 'width'
"""


def test_symptoms_read_observed_and_expected():
    assert symptoms(PYTEST_OUT) == [
        "for the input ('A b') the result is 'a_b', but 'a-b' is expected",
        "it fails with TypeError: wrap() got an unexpected keyword argument 'width' where a "
        "correct result is expected",
    ]


def test_redact_and_intent():
    text = "Fix slugify() in textkit/slug.py; see test_slug and textkit.slug.slugify"
    out = redact(text, {"slugify", "textkit", "slug"})
    assert "slug" not in out and ".py" not in out and "test_" not in out
    assert intent("Fix x\n\nLonger why.\nSigned-off-by: a <a@b>\n") == ("Fix x", "Longer why.")


def test_mutation_task_tickets_name_nothing(fixture_tasks):
    _, tasks, _ = fixture_tasks
    for t in tasks:
        output = t.prompt.split("```")[1]
        prompt = ticket_prompt(t, output)
        assert (
            "- for the input" in prompt or "- it fails with" in prompt or "- the result" in prompt
        )
        words = set(re.findall(r"[A-Za-z_][\w./]*", prompt))
        leaked = {n for n in names_of(t) if n in words and n != "textkit"}
        assert not leaked, leaked
        assert not re.search(r"\w+\.py\b|test_\w+|::", prompt)


def test_make_tasks_refuses_an_unknown_prompt_style(tmp_path):
    with pytest.raises(ConfigError, match="--prompt-style 'issue'"):
        make_tasks("unused", tmp_path, prompt_style="issue")


def test_dotted_names_are_redacted_whole():
    out = redact("calling inflection.titleize() on it, or titleize", {"titleize", "inflection"})
    assert "the code.the code" not in out and "titleize" not in out
    assert redact("see os.path.join", {"titleize"}) == "see os.path.join"


def test_commit_kinds_and_subjects_that_tell_the_fix():
    from verigap.repos.tickets import commit_kind, describes_change

    assert commit_kind("Fix titleize() capitalizing only words starting A-Z") == "fix"
    assert commit_kind("added ordinalize") == "feature"
    assert commit_kind("Add a check for invalid n in chunked()") == "fix"
    assert commit_kind("Simplify mean") == "refactor"
    assert describes_change("Fix titleize() capitalizing only words starting A-Z")
    assert not describes_change("Values below the range came back as the upper bound")


def test_a_feature_commit_is_a_request_and_no_subject_tells_the_fix(fixture_tasks):
    _, tasks, _ = fixture_tasks
    t = tasks[0]
    output = t.prompt.split("```")[1]
    feature = ticket_prompt(t, output, message="added ordinalize\n\nNew helper.")
    assert "Requested:" in feature and "Reported:" not in feature
    assert "ordinalize" not in feature and "New helper" not in feature
    fix = ticket_prompt(t, output, message="Fix slugify() to use dashes")
    assert "Reported:" in fix and "dashes" not in fix and "Fix" not in fix.split("What users")[0]
