"""Mined tasks split their failing tests as make-tasks does: test functions that run one shared
body (a mixin's method inherited by several test classes) are hidden or visible together, so
the workspace can always be cut (no ``SharedHiddenBody`` at the end of a mined commit)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from verigap.repos.combine import NO_GROUPS, BodyGroups
from verigap.repos.mine import Rejected, split_fail_to_pass

A = "tests/test_c.py::TestA::test_get"
B = "tests/test_c.py::TestB::test_get"  # the same body as A's, inherited from a mixin
C = "tests/test_c.py::test_other"
D = "tests/test_c.py::test_unrelated"


def _p() -> SimpleNamespace:
    return SimpleNamespace(passing=[A, B, C, D], reach={"pkg/m.py::f": [A, B, C]})


def test_copies_of_a_shared_body_fall_on_one_side():
    groups = BodyGroups(of={A: A, B: A})
    visible, hidden = split_fail_to_pass(_p(), {A, B, C}, ["pkg/m.py::f"], groups)
    assert {A, B} <= set(visible) and hidden == [C]
    # the control: unit by unit, the two copies of one body are split apart
    visible, hidden = split_fail_to_pass(_p(), {A, B, C}, ["pkg/m.py::f"], NO_GROUPS)
    assert A in visible and B in hidden


def test_a_group_that_never_passes_whole_is_never_visible():
    groups = BodyGroups(of={A: A, B: A}, pinned=frozenset({A}))
    visible, hidden = split_fail_to_pass(_p(), {A, B, C}, ["pkg/m.py::f"], groups)
    assert C in visible and {A, B} <= set(hidden)
    with pytest.raises(Rejected, match="never passes"):
        split_fail_to_pass(_p(), {A, B}, ["pkg/m.py::f"], groups)
