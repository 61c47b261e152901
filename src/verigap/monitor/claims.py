"""Claim checks moved to the core (:mod:`verigap.claims`): the hardened grader and the monitor
both read them, so neither family imports the other. This name stays for existing imports."""

from verigap.claims import (  # noqa: F401
    EXECUTED,
    FIXED,
    NO_RUN,
    NOT_CODE,
    PASS,
    RAN,
    TEST_CMD,
    UNSUPPORTED,
    Claim,
    check,
    events_from_messages,
    executed,
    extract,
    final_words,
    runner_calls,
)
