import numpy as np
import pytest
from pydantic import ValidationError

from verigap.rewards import (
    Audit,
    DeletionPenalty,
    EpisodeChecks,
    Oracle,
    Visible,
    parse_scheme,
    scheme_from_dict,
)

PASSED = np.array([True, True, False, True, False])
CORRECT = np.array([True, False, False, False, True])
DELETIONS = np.array([0, 2, 1, 1, 0])


def test_visible_pays_visible_checks_only():
    out = Visible().pay_batch(PASSED, CORRECT, DELETIONS, np.random.default_rng(0))
    assert out.reward.tolist() == [1, 1, 0, 1, 0]
    assert not out.audited.any()


def test_deletion_penalty_subtracts_per_deletion():
    out = DeletionPenalty(per_deletion=0.5).pay_batch(PASSED, CORRECT, DELETIONS, None)
    assert out.reward.tolist() == [1.0, 0.0, -0.5, 0.5, 0.0]


def test_oracle_pays_the_truth_and_always_runs_the_hidden_check():
    out = Oracle().pay_batch(PASSED, CORRECT, DELETIONS, None)
    assert out.reward.tolist() == [1, 0, 0, 0, 1]
    assert out.audited.all()


def test_full_audit_catches_every_false_success():
    out = Audit(rate=1.0, penalty=-1.0).pay_batch(
        PASSED, CORRECT, DELETIONS, np.random.default_rng(0)
    )
    assert out.caught.tolist() == [False, True, False, True, False]
    assert out.reward.tolist() == [1, -1, 0, -1, 0]


def test_zero_audit_is_visible():
    out = Audit(rate=0.0).pay_batch(PASSED, CORRECT, DELETIONS, np.random.default_rng(0))
    assert out.reward.tolist() == [1, 1, 0, 1, 0] and not out.audited.any()


def test_audit_rate_is_respected_and_seeded():
    n = 200_000
    passed, correct = np.ones(n, bool), np.zeros(n, bool)
    a = Audit(rate=0.1).pay_batch(passed, correct, np.zeros(n), np.random.default_rng(7))
    b = Audit(rate=0.1).pay_batch(passed, correct, np.zeros(n), np.random.default_rng(7))
    assert abs(a.audited.mean() - 0.1) < 0.005
    assert (a.caught == a.audited).all()  # every audited episode here is a hack
    assert (a.reward == b.reward).all()


@pytest.mark.parametrize(
    "scheme",
    [Visible(), DeletionPenalty(per_deletion=0.3), Audit(rate=0.25, penalty=-2.0), Oracle()],
)
def test_scalar_and_vectorized_forms_agree(scheme):
    rng_batch, rng_scalar = np.random.default_rng(11), np.random.default_rng(11)
    n = 500
    g = np.random.default_rng(3)
    passed, correct, dels = g.random(n) < 0.7, g.random(n) < 0.4, g.integers(0, 3, n)
    batch = scheme.pay_batch(passed, correct, dels, rng_batch)
    for i in range(n):
        one = scheme.pay(EpisodeChecks(bool(passed[i]), bool(correct[i]), int(dels[i])), rng_scalar)
        assert one.reward == batch.reward[i]
        assert one.audited == batch.audited[i] and one.caught == batch.caught[i]


def test_schemes_validate_and_parse():
    assert parse_scheme("audit:0.1") == Audit(rate=0.1)
    assert parse_scheme("audit:0.5:-2") == Audit(rate=0.5, penalty=-2.0)
    assert parse_scheme("deletion:0.25") == DeletionPenalty(per_deletion=0.25)
    assert scheme_from_dict({"kind": "oracle"}) == Oracle()
    assert Audit(rate=0.05).label == "audit_5"
    with pytest.raises(ValidationError):
        Audit(rate=1.5)
    with pytest.raises(ValidationError):
        scheme_from_dict({"kind": "audit", "rate": 0.1, "typo": 1})
    with pytest.raises(ValueError, match="unknown reward scheme"):
        parse_scheme("bogus")
