"""The reviewer rubric, now in the core (:mod:`verigap.review`); this path re-exports it."""

from verigap.review import (
    ITEMS,
    RUBRICS,
    ItemResult,
    Scope,
    added_lines,
    as_checks,
    changed,
    is_migration,
    is_test,
    read_tree,
    review,
    schema_of,
    unified,
)

__all__ = [
    "ITEMS",
    "RUBRICS",
    "ItemResult",
    "Scope",
    "added_lines",
    "as_checks",
    "changed",
    "is_migration",
    "is_test",
    "read_tree",
    "review",
    "schema_of",
    "unified",
]
