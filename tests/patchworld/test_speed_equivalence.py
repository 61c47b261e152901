"""The pilot's faster paths give the very numbers of the plain ones (issue 19).

``all_features`` builds every step's observation in one pass and ``sample_group`` draws a whole
GRPO group at once; both must equal the per-step and per-sample code bit for bit, or the pilot's
per-seed results would move.
"""

from __future__ import annotations

import numpy as np
import pytest

from verigap.patchworld.policy import N_FEATURES, all_features, features, sample, sample_group
from verigap.patchworld.programs import generate


@pytest.mark.parametrize("k", [1, 2, 4, 10])
def test_all_features_equals_stacked_per_step_features(k):
    programs = generate(k, 200, seed=30 + k)
    fast = all_features(programs)
    plain = np.stack([features(programs, t) for t in range(k)], axis=1)
    assert fast.shape == (200, k, N_FEATURES)
    assert fast.dtype == plain.dtype == np.float32
    assert np.array_equal(fast, plain)
    assert fast.any(axis=2).all()  # every row carries an observation (a zero row would pass)


@pytest.mark.parametrize(("rows", "n"), [(1, 1), (64, 8), (13, 3)])
def test_sample_group_draws_what_repeated_sample_draws(rows, n):
    logp = np.log(np.random.default_rng(rows).dirichlet(np.ones(34) * 0.3, rows)).astype(
        np.float32)
    fast_rng, plain_rng = np.random.default_rng(7), np.random.default_rng(7)
    fast = sample_group(logp, fast_rng, n)
    plain = np.stack([sample(logp, plain_rng) for _ in range(n)], axis=1)
    assert fast.shape == (rows, n)
    assert np.array_equal(fast, plain)
    assert fast_rng.random() == plain_rng.random()  # the stream continues where it did
    if rows * n > 8:
        assert len(np.unique(fast)) > 1  # real draws, not one repeated action
