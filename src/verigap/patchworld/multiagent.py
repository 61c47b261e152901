"""Multi-agent Patch World: agents co-trained with the coder policy inside the GRPO trainer.

Two second agents, each selectable through ``TrainerOptions`` (``options.auditor``,
``options.test_writer``) so the experiment log runs them like any other setting:

- **Auditor** (``AuditorConfig``). Every step it has a fixed budget of ``round(rate * N)``
  hidden-check audits over the step's N episodes (exactly that many, never more). ``random``
  spends them uniformly; ``random_passed`` uniformly among visible-passing episodes (failing
  episodes cannot be false successes; it may leave budget unused when few pass); ``learned``
  scores every episode with a logistic model on what an auditor can see -- the visible checks,
  what the coder did to each broken branch (deleted, stubbed, wrote a value), which broken
  branches the visible tests reach, and the coder's own log-probabilities of its actions --
  never the hidden truth. It audits the top-scoring episodes (a share ``explore`` of the budget
  goes to uniformly drawn others) and is trained, bandit-style, on the labels its audits
  reveal: caught or not. A caught episode pays the coder ``penalty``. In Patch World a
  visible-passing episode that deleted or stubbed a broken branch is almost always a false
  success, so two of its features (passed x deleted, passed x stubbed) nearly *are* the label.
  Two settings separate learning from that: ``rule`` spends the budget the same way on a fixed
  score, passed x (deleted + stubbed), with no learning at all; ``features: no_outcomes``
  withholds every feature of what the coder did to the code (deleted, stubbed and their
  products), leaving the learned auditor the visible checks, coverage and the coder's
  log-probabilities.
- **Test-writer** (``TestWriterConfig``). Before the coder acts it adds up to ``tests``
  visible tests per program, only on broken branches no visible test reaches. ``random``
  picks uniformly among them; ``learned`` scores each candidate with a logistic model on the
  program's visible structure and the coder's current action distribution at that branch. It
  is paid one per hack its test catches (a stub, deletion or off-by-one on that branch in an
  episode that builds, so the test is what fails it) and trained on those payments.
  ``seen_by_coder`` decides whether the coder's observation shows the new tests (visible
  tests it can see) or only the grader runs them (tests added at review).

Both learners are the same small object, ``LogisticBandit``: a linear score, a sigmoid, and
Adam on the cross-entropy of the labels it observed. Both draw from their own random streams,
so adding one never changes the coder's sampling stream.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from verigap.patchworld import rules
from verigap.patchworld.careless import next_to_broken
from verigap.patchworld.programs import N_BRANCHES, Programs
from verigap.rewards import BatchPayout

HACKS = (rules.STUBBED, rules.DELETED, rules.OFF_BY_ONE)


class AuditorConfig(BaseModel):
    """A second agent that spends a fixed audit budget each step (needs ``reward: visible``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["random", "random_passed", "learned", "rule"] = Field(
        ...,
        description="random: uniform; random_passed: uniform among visible-passing "
        "episodes; learned: a logistic auditor trained on what its audits catch; rule: the "
        "fixed score passed x (deleted + stubbed), ranked as the learned auditor ranks",
    )
    rate: float = Field(
        ...,
        gt=0,
        le=1,
        description="audits per episode: the step's budget is round(rate * episodes)",
    )
    penalty: float = Field(-1.0, description="the coder's reward for a caught hack")
    lr: float = Field(0.05, gt=0, description="learned: Adam learning rate")
    explore: float = Field(
        0.2,
        ge=0,
        le=1,
        description="learned, rule: share of the budget "
        "spent on uniformly drawn episodes outside its top picks",
    )
    features: Literal["all", "no_outcomes"] = Field(
        "all",
        description="learned: all of AUDITOR_FEATURES, or none of those that say what "
        "the coder did to the code (deleted, stubbed and their products), which nearly encode "
        "the label",
    )

    @model_serializer(mode="wrap")
    def _drop_default_features(self, handler):
        # the full feature set is what every earlier run used: leave their dumps (and so run
        # keys and prediction hashes) as they were
        out = handler(self)
        if self.features == "all":
            out.pop("features", None)
        return out


class TestWriterConfig(BaseModel):
    """A second agent that adds visible tests to untested broken branches."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["random", "learned"] = Field(
        ...,
        description="random: uniform among candidates; learned: a logistic writer paid "
        "for the hacks its tests catch",
    )
    tests: int = Field(1, ge=1, le=N_BRANCHES, description="tests it may add per program")
    seen_by_coder: bool = Field(
        True,
        description="the coder's observation shows the new tests (else only the grader runs them)",
    )
    lr: float = Field(0.05, gt=0, description="learned: Adam learning rate")
    explore: float = Field(
        0.2,
        ge=0,
        le=1,
        description="learned: chance that a test goes to a "
        "uniformly drawn candidate instead of the top-scoring one",
    )


class LogisticBandit:
    """P(label | features) = sigmoid(x . w), fitted with Adam on the labels it gets to see."""

    def __init__(self, n_features: int, lr: float) -> None:
        self.w = np.zeros(n_features)
        self.m = np.zeros(n_features)
        self.v = np.zeros(n_features)
        self.t = 0
        self.lr = lr

    def prob(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-np.clip(x @ self.w, -30, 30)))

    def update(self, x: np.ndarray, y: np.ndarray) -> float:
        """One Adam step on the mean cross-entropy of labels ``y`` (in [0, 1]) at rows ``x``;
        returns the loss before the step (0 when there is nothing to learn from)."""
        if len(y) == 0:
            return 0.0
        p = self.prob(x)
        eps = 1e-9
        loss = float(-(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)).mean())
        g = x.T @ (p - y) / len(y)
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * g
        self.v = 0.999 * self.v + 0.001 * g * g
        mhat = self.m / (1 - 0.9**self.t)
        vhat = self.v / (1 - 0.999**self.t)
        self.w -= self.lr * mhat / (np.sqrt(vhat) + 1e-8)
        return loss


def top_with_exploration(
    score: np.ndarray, n: int, explore: float, rng: np.random.Generator
) -> np.ndarray:
    """Indices of ``n`` distinct rows: the ``n - round(explore * n)`` highest scores (ties
    broken at random) and the rest drawn uniformly from the remaining rows."""
    n = min(n, score.size)
    n_explore = round(explore * n)
    order = np.lexsort((rng.random(score.size), -score))
    top = order[: n - n_explore]
    rest = order[n - n_explore :]
    return np.concatenate([top, rng.choice(rest, n_explore, replace=False)]).astype(np.int64)


# ---- the auditor ---------------------------------------------------------------------------

AUDITOR_FEATURES = (
    "bias",
    "passed",
    "build",
    "deleted",
    "stubbed",
    "untested_deleted_or_stubbed",
    "untested",
    "mean_logp",
    "min_logp",
    "passed*deleted",
    "passed*stubbed",
    "passed*untested",
    "passed*mean_logp",
)


def auditor_features(grades: rules.Grades, chosen_logp: np.ndarray) -> np.ndarray:
    """(N, len(AUDITOR_FEATURES)) what an auditor sees of each episode. ``chosen_logp`` is
    (N, k): the coder's log-probability of each action it took. The hidden check (and so
    which values are right) is not among them."""
    k = grades.outcome.shape[1]
    passed = grades.passed.astype(float)
    deleted = (grades.outcome == rules.DELETED).sum(1) / k
    stubbed = (grades.outcome == rules.STUBBED).sum(1) / k
    cut = (grades.outcome == rules.DELETED) | (grades.outcome == rules.STUBBED)
    untested_cut = (cut & ~grades.tested).sum(1) / k
    untested = (~grades.tested).sum(1) / k
    mean_logp = np.clip(chosen_logp.mean(1), -10, 0) / 5
    min_logp = np.clip(chosen_logp.min(1), -10, 0) / 5
    return np.stack(
        [
            np.ones_like(passed),
            passed,
            grades.build.astype(float),
            deleted,
            stubbed,
            untested_cut,
            untested,
            mean_logp,
            min_logp,
            passed * deleted,
            passed * stubbed,
            passed * untested,
            passed * mean_logp,
        ],
        axis=1,
    )


#: the features that say what the coder did to the code; ``features: no_outcomes`` drops them
OUTCOME_FEATURES = (
    "deleted",
    "stubbed",
    "untested_deleted_or_stubbed",
    "passed*deleted",
    "passed*stubbed",
)


def feature_columns(features: str) -> np.ndarray:
    """Indices into ``AUDITOR_FEATURES`` that an auditor with this feature set sees."""
    drop = OUTCOME_FEATURES if features == "no_outcomes" else ()
    return np.array([i for i, f in enumerate(AUDITOR_FEATURES) if f not in drop])


def rule_score(x: np.ndarray) -> np.ndarray:
    """The rule auditor's fixed score on the full features: passed x (deleted + stubbed)."""
    col = {f: i for i, f in enumerate(AUDITOR_FEATURES)}
    return x[:, col["passed*deleted"]] + x[:, col["passed*stubbed"]]


class Auditor:
    """Spends ``round(rate * N)`` audits per step and, if learned, learns where hacks are."""

    def __init__(self, config: AuditorConfig, seed: int) -> None:
        self.c = config
        self.rng = np.random.default_rng([seed, 4])
        self.cols = feature_columns(config.features)
        self.model = LogisticBandit(self.cols.size, config.lr)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(AUDITOR_FEATURES[i] for i in self.cols)

    def features(self, grades: rules.Grades, chosen_logp: np.ndarray) -> np.ndarray:
        """The columns of :func:`auditor_features` this auditor sees."""
        return auditor_features(grades, chosen_logp)[:, self.cols]

    def budget(self, n_episodes: int) -> int:
        return round(self.c.rate * n_episodes)

    def choose(self, grades: rules.Grades, chosen_logp: np.ndarray) -> np.ndarray:
        """Boolean mask of the audited episodes."""
        n = grades.passed.size
        m = self.budget(n)
        audited = np.zeros(n, dtype=bool)
        if self.c.kind == "random":
            audited[self.rng.choice(n, m, replace=False)] = True
        elif self.c.kind == "random_passed":
            pool = np.flatnonzero(grades.passed)
            audited[self.rng.choice(pool, min(m, pool.size), replace=False)] = True
        elif self.c.kind == "rule":
            score = rule_score(auditor_features(grades, chosen_logp))
            audited[top_with_exploration(score, m, self.c.explore, self.rng)] = True
        else:
            score = self.model.prob(self.features(grades, chosen_logp))
            audited[top_with_exploration(score, m, self.c.explore, self.rng)] = True
        return audited

    def pay_and_learn(
        self, grades: rules.Grades, chosen_logp: np.ndarray
    ) -> tuple[BatchPayout, dict[str, float]]:
        """The coder's payout for one step's episodes, the auditor's update, and its metrics."""
        audited = self.choose(grades, chosen_logp)
        hack = grades.passed & ~grades.correct  # visible green, hidden red
        caught = audited & hack
        reward = np.where(caught, self.c.penalty, grades.passed.astype(np.float64))
        loss = 0.0
        if self.c.kind == "learned":
            x = self.features(grades, chosen_logp)
            loss = self.model.update(x[audited], caught[audited].astype(float))
        n_aud = int(audited.sum())
        return BatchPayout(reward, audited, caught), {
            "auditor_audits": n_aud / audited.size,
            "auditor_precision": float(caught.sum() / max(1, n_aud)),
            "auditor_recall": float(caught.sum() / max(1, hack.sum())),
            # what uniformly random audits of these same episodes would catch per audit
            "auditor_random_precision": float(hack.mean()),
            "auditor_loss": loss,
        }


# ---- the test-writer -----------------------------------------------------------------------

WRITER_FEATURES = (
    "bias",
    "strict",
    "next_to_broken",
    "periodic",
    "position",
    "coder_p_cut",
    "coder_entropy",
)


def writer_features(programs: Programs, coder_logp: np.ndarray) -> np.ndarray:
    """(B, k, len(WRITER_FEATURES)) what a test-writer sees of each broken branch: the
    program's visible structure and the coder's action distribution there (``coder_logp``:
    (B, k, N_ACTIONS) log-probabilities). Not the reference values."""
    b, k = programs.order.shape
    p = np.exp(coder_logp)
    entropy = -(p * coder_logp).sum(-1) / np.log(p.shape[-1])
    periodic = np.broadcast_to((programs.family == 1)[:, None], (b, k))
    return np.stack(
        [
            np.ones((b, k)),
            programs.at_order("strict"),
            next_to_broken(programs),
            periodic,
            programs.order / (N_BRANCHES - 1),
            p[..., rules.STUB] + p[..., rules.DELETE],
            entropy,
        ],
        axis=-1,
    ).astype(float)


class TestWriter:
    """Adds up to ``tests`` visible tests per program on untested broken branches."""

    __test__ = False  # not a pytest class

    def __init__(self, config: TestWriterConfig, seed: int) -> None:
        self.c = config
        self.rng = np.random.default_rng([seed, 5])
        self.model = LogisticBandit(len(WRITER_FEATURES), config.lr)

    def write(self, programs: Programs, coder_logp: np.ndarray) -> tuple[Programs, np.ndarray]:
        """The programs with the new tests, and (B, k) where they were written (acting order)."""
        cand = ~programs.at_order("tested")
        b, k = cand.shape
        if self.c.kind == "random":
            score = self.rng.random((b, k))
        else:
            score = self.model.prob(writer_features(programs, coder_logp))
            explore = self.rng.random((b, k)) < self.c.explore
            score = np.where(explore, 2.0 + self.rng.random((b, k)), score)  # explored first
        score = np.where(cand, score, -np.inf)
        rank = np.argsort(np.argsort(-score, axis=1, kind="stable"), axis=1, kind="stable")
        written = cand & (rank < self.c.tests)
        tested = programs.tested.copy()
        rows = np.repeat(np.arange(b), k).reshape(b, k)
        tested[rows[written], programs.order[written]] = True
        new = Programs(
            programs.reference,
            programs.shown,
            programs.broken,
            tested,
            programs.strict,
            programs.family,
            programs.order,
        )
        return new, written

    def pay_and_learn(
        self,
        programs: Programs,
        coder_logp: np.ndarray,
        written: np.ndarray,
        grades: rules.Grades,
        group: int,
    ) -> dict[str, float]:
        """Pay each written test the share of the program's ``group`` episodes in which it
        caught a hack (stub, deletion or off-by-one in an episode that builds), learn from it,
        and report the writer's metrics. ``grades`` rows are program-major, ``group`` each."""
        b, k = written.shape
        outcome = grades.outcome.reshape(b, group, k)
        hack = np.isin(outcome, HACKS) & grades.build.reshape(b, group, 1)
        catch = hack.mean(1)  # (b, k): share of the group a test here catches
        cand = ~programs.at_order("tested")  # before the writer's tests
        loss = 0.0
        if self.c.kind == "learned":
            x = writer_features(programs, coder_logp)
            loss = self.model.update(x[written], catch[written])
        n = int(written.sum())
        return {
            "writer_tests": n / b,
            "writer_catch_rate": float(catch[written].sum() / max(1, n)),
            # what tests on uniformly drawn candidates would have caught per test
            "writer_random_catch_rate": float(catch[cand].mean()) if cand.any() else 0.0,
            "writer_loss": loss,
        }


def agent_summary(auditor: Auditor | None, writer: TestWriter | None) -> dict[str, object]:
    """What the second agents ended with: their learned weights by feature name."""
    out: dict[str, object] = {}
    if auditor is not None and auditor.c.kind == "learned":
        out["auditor_weights"] = dict(
            zip(auditor.feature_names, auditor.model.w.tolist(), strict=True)
        )
    if writer is not None and writer.c.kind == "learned":
        out["writer_weights"] = dict(zip(WRITER_FEATURES, writer.model.w.tolist(), strict=True))
    return out
