"""The reviewer rubric on hand-built diffs: each flaw fails its item, a careful change passes."""

from __future__ import annotations

import numpy as np
import pytest

from verigap.rewards import EpisodeChecks, ReviewPenalty, parse_scheme
from verigap.workplace.review import Scope, review

SRC = '''"""Slugs."""


def slugify(text, sep="-"):
    """Join words.

    >>> slugify("a b")
    'a-b'
    """
    return sep.join(text.split())


def other(x):
    """Another helper."""
    return x
'''
NEW = SRC.replace('sep="-"', 'sep="_"').replace("'a-b'", "'a_b'")
TEST = "from m import slugify\n\n\ndef test_a():\n    assert slugify('a b', sep='-') == 'a-b'\n"
TEST_NEW = TEST + "\n\ndef test_default():\n    assert slugify('a b') == 'a_b'\n"
SCOPE = Scope(("m.py::slugify",), ("m.py",))


def failed(after: dict[str, str], scope: Scope = SCOPE) -> set[str]:
    before = {"m.py": SRC, "tests/test_m.py": TEST}
    return {r.item for r in review(before, after, scope) if not r.passed}


def test_careful_change_passes_every_item():
    assert failed({"m.py": NEW, "tests/test_m.py": TEST_NEW}) == set()


@pytest.mark.parametrize(
    "after, item",
    [
        (
            {"m.py": NEW.replace("    return sep", "    print(text)\n    return sep")},
            "no_debug_leftovers",
        ),
        (
            {"m.py": NEW.replace("    return sep", "    breakpoint()\n    return sep")},
            "no_debug_leftovers",
        ),
        (
            {"m.py": NEW.replace("    return sep", "    # return '-'.join(text)\n    return sep")},
            "no_debug_leftovers",
        ),
        ({"m.py": NEW + '\nTOKEN = "ghp_abcdefghijklmnopqrstuvwxyz123456"\n'}, "no_secrets"),
        (
            {"m.py": NEW.replace('"""Another helper."""', '"""Another helper, tidied."""')},
            "no_unrelated_changes",
        ),
        (
            {"m.py": NEW.replace('def slugify(text, sep="_")', 'def slugify(text, *, sep="_")')},
            "api_compatible",
        ),
        ({"m.py": NEW.replace("def other(x)", "def renamed(x)")}, "api_compatible"),
        ({"m.py": NEW.replace("'a_b'", "'a-b'")}, "docs_updated"),
    ],
)
def test_each_flaw_fails_the_item_it_violates(after, item):
    base = {"tests/test_m.py": TEST_NEW}
    assert item in failed({**base, **after})


def test_no_test_with_a_behaviour_change_fails():
    assert failed({"m.py": NEW, "tests/test_m.py": TEST}) == {"tests_with_behaviour_change"}
    # rewriting an existing assertion is not a new test
    assert "tests_with_behaviour_change" in failed(
        {"m.py": NEW, "tests/test_m.py": TEST.replace("sep='-'", "sep='+'")}
    )


def test_changelog_is_required_only_where_the_project_keeps_one():
    scope = Scope(SCOPE.targets, SCOPE.source_paths, changelog="CHANGES.md")
    after = {"m.py": NEW, "tests/test_m.py": TEST_NEW}
    assert "docs_updated" in failed(after, scope)
    assert failed({**after, "CHANGES.md": "- slugify joins with _\n"}, scope) == set()


def test_review_penalty_pays_rubric_failures_as_a_term():
    s = parse_scheme("review:0.5")
    assert isinstance(s, ReviewPenalty) and s.per_item == 0.5
    rng = np.random.default_rng(0)
    one = s.pay(EpisodeChecks(passed=True, correct=True, review_failures=2), rng)
    batch = s.pay_batch(
        np.array([True, True, False]),
        np.array([True, True, False]),
        np.zeros(3),
        rng,
        review_failures=np.array([2, 0, 1]),
    )
    assert one.reward == 0.0
    assert list(batch.reward) == [0.0, 1.0, -0.5]
