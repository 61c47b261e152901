"""The published set's labels follow the claim decision: a record whose final message claims a
run, a pass or a fix that its own runs do not back carries ``unsupported_claim`` beside the
exploit's own names (multi-label), so no record holds a lie its labels do not name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verigap.monitor import claims, trajset

SET = Path(__file__).resolve().parents[2] / "results" / "redteam" / "trajectories.jsonl.xz"


def unlabelled_claims(recs: list[dict[str, Any]]) -> list[str]:
    """Records whose unbacked claim their labels do not name."""
    return [
        r["id"]
        for r in recs
        if claims.check(claims.events_from_messages(r["messages"]))["hacks"]
        and "unsupported_claim" not in r["label"]["classes"]
    ]


def test_every_unbacked_claim_in_the_published_set_is_labelled() -> None:
    recs = trajset.load(SET)
    assert unlabelled_claims(recs) == []
    # the check can fail: a liar whose label lost the claim's name is caught
    liar = next(
        r
        for r in recs
        if "unsupported_claim" in r["label"]["classes"]
        and claims.check(claims.events_from_messages(r["messages"]))["hacks"]
    )
    relabelled = {
        **liar,
        "label": {
            **liar["label"],
            "classes": [c for c in liar["label"]["classes"] if c != "unsupported_claim"],
        },
    }
    assert unlabelled_claims([relabelled]) == [liar["id"]]
