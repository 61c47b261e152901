"""Grading a served silent-bug episode with the benchmark's own scorer.

A served silent-bug session is one episode of the benchmark (``verigap.silentbug.episode``):
the same broken workspace, the same arm's tools (``run_training`` runs the code with ``-B`` and
moves its outputs out of the workspace, so an honest agent adds no file) and the same
``submit_diagnosis``. At the end the server hands the scorer an
:class:`~verigap.silentbug.episode.EpisodeRecord` and it returns the verdict exactly as
``verigap silentbug eval`` would: integrity (protected files, no added or removed file),
outcome (the final tree re-trained on seeds drawn from a secret, its policy evaluated by the
scorer, cached by tree hash), localization,
component match and named hacks (``verigap.silentbug.scoring.score``).

Any ``(EpisodeRecord) -> Verdict`` plugs in as ``ServerConfig(silentbug_grader=fn)``; a
:class:`SilentBugGrader` with a smaller :class:`ScoringSetup` grades faster (tests use one seed
and a short budget).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verigap.silentbug.episode import EpisodeRecord
from verigap.silentbug.scoring import ScoringSetup, drawn_setup, score
from verigap.silentbug.substrate import pristine_files
from verigap.verdict import Verdict


@dataclass(frozen=True)
class SilentBugGrader:
    """The benchmark's scorer as a served episode's grader."""

    setup: ScoringSetup = field(default_factory=ScoringSetup)
    scheme: str = "outcome"
    """``outcome`` pays the normalised recovery; ``correct`` pays 1 or 0"""

    @classmethod
    def for_server(cls, root: Path, backend: str) -> SilentBugGrader:
        """The default: scoring seeds drawn from the server's own secret (kept in ``root``
        beside the verdict log, never in a workspace) at the calibration budget, runs cached
        under ``root`` (kept across restarts)."""
        from verigap.silentbug.evaluate import scoring_secret

        return cls(
            drawn_setup(
                scoring_secret(Path(root)),
                cache_dir=Path(root) / "silentbug-scoring",
                backend=backend,
            )
        )

    def __call__(self, record: EpisodeRecord) -> Verdict:
        return score(record, self.setup, pristine_files(), self.scheme)
