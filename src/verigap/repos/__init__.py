"""Repo tasks: real Python projects become bug-fix tasks with visible and hidden checks.

prepare (cached env + baseline) -> mutate (libcst operators) -> validate (FAIL_TO_PASS per
mutation) -> tasks (k sites, visible/hidden split, task files) -> graders (v1 naive, v2 hardened).
"""
