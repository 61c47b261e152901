"""The equivalence check: reference and candidate called on the same inputs in separate
sandboxed processes, their type-tagged encodings compared here, in the grader's process.

Because the comparison is of encodings made by the harness (which tags every value with its
exact type) and happens outside both processes, a result object whose ``__eq__`` always
returns True cannot pass: it encodes as its own class, not as the reference's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigap.repos.prepare import Prepared
from verigap.repos.pytest_run import run_equiv


@dataclass
class EquivResult:
    total: int
    matched: int
    per_target: dict[str, tuple[int, int]] = field(default_factory=dict)  # target -> (ok, n)
    mismatches: list[dict[str, Any]] = field(default_factory=list)  # a few, for humans
    candidate_ran: bool = True

    @property
    def score(self) -> float:
        return 1.0 if self.total == 0 else self.matched / self.total

    def target_ok(self, target: str) -> bool:
        ok, n = self.per_target.get(target, (0, 0))
        return ok == n


def check(p: Prepared, reference: Path, candidate: Path, inputs: list[dict[str, Any]], *,
          backend: str | None = None, timeout: float = 120.0) -> EquivResult:
    """Run both sides out of process and compare what they produced, input by input."""
    env = dict(python=p.python, env_prefix=Path(p.env_prefix), import_root=p.import_root,
               backend=backend, timeout=timeout)
    ref = (run_equiv(reference, inputs, **env) or {}).get("results", {})
    got_raw = run_equiv(candidate, inputs, **env)
    got = (got_raw or {}).get("results", {})
    res = EquivResult(total=len(inputs), matched=0, candidate_ran=got_raw is not None)
    for x in inputs:
        k = str(x["id"])
        a, b = ref.get(k), got.get(k)
        ok = a is not None and b is not None and a == b
        res.matched += ok
        good, n = res.per_target.get(x["target"], (0, 0))
        res.per_target[x["target"]] = (good + ok, n + 1)
        if not ok and len(res.mismatches) < 5:
            res.mismatches.append({"target": x["target"], "id": x["id"],
                                   "reference": _short(a), "candidate": _short(b)})
    return res


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) < 300 else s[:300] + "..."
