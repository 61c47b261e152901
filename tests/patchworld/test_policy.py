"""The NumPy policy's maths against hand-computed values and finite differences."""

import numpy as np
import pytest

from verigap.patchworld.grpo import group_advantages
from verigap.patchworld.policy import (
    MLP,
    N_FEATURES,
    Adam,
    categorical_kl,
    features,
    grad_kl_wrt_logits,
    grad_nll_wrt_logits,
    log_softmax,
    sample,
)
from verigap.patchworld.programs import N_VALUES, generate
from verigap.patchworld.rules import N_ACTIONS


def test_log_softmax_and_kl_by_hand():
    z = np.array([[0.0, np.log(3.0)]])  # probabilities 1/4, 3/4
    assert np.allclose(np.exp(log_softmax(z)), [[0.25, 0.75]])
    logp, logq = np.log([[0.25, 0.75]]), np.log([[0.5, 0.5]])
    expected = 0.25 * np.log(0.5) + 0.75 * np.log(1.5)
    assert categorical_kl(logp, logq)[0] == pytest.approx(expected)
    assert categorical_kl(logp, logp)[0] == pytest.approx(0.0)


def _numeric_grad(f, z, eps=1e-6):
    g = np.zeros_like(z)
    for idx in np.ndindex(z.shape):
        d = np.zeros_like(z)
        d[idx] = eps
        g[idx] = (f(z + d) - f(z - d)) / (2 * eps)
    return g


def test_logit_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    z, zq = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    logq = log_softmax(zq)
    a = np.array([0, 4, 2])
    g_kl = grad_kl_wrt_logits(log_softmax(z), logq)
    assert np.allclose(
        g_kl, _numeric_grad(lambda x: categorical_kl(log_softmax(x), logq).sum(), z), atol=1e-6
    )
    g_nll = grad_nll_wrt_logits(log_softmax(z), a)
    num = _numeric_grad(lambda x: -log_softmax(x)[np.arange(3), a].sum(), z)
    assert np.allclose(g_nll, num, atol=1e-6)


def test_mlp_backward_matches_finite_differences():
    rng = np.random.default_rng(1)
    model = MLP.init(rng, hidden=6, dtype=np.float64)
    model.w2 = rng.normal(size=model.w2.shape)  # non-trivial output layer
    x = rng.normal(size=(4, N_FEATURES))
    a = rng.integers(0, N_ACTIONS, 4)
    adv = rng.normal(size=4)
    logq = log_softmax(rng.normal(size=(4, N_ACTIONS)))
    beta = 0.3

    def loss(m):
        logp = m.log_probs(x)
        return float(-(adv * logp[np.arange(4), a]).sum() + beta * categorical_kl(logp, logq).sum())

    logits, h = model.forward(x)
    logp = log_softmax(logits)
    dz = -adv[:, None] * -grad_nll_wrt_logits(logp, a) + beta * grad_kl_wrt_logits(logp, logq)
    grads = model.backward(x, h, dz)
    for p, g in zip(model.params(), grads, strict=True):
        for idx in [tuple(rng.integers(0, s) for s in p.shape) for _ in range(8)]:
            old = p[idx]
            p[idx] = old + 1e-6
            up = loss(model)
            p[idx] = old - 1e-6
            down = loss(model)
            p[idx] = old
            assert g[idx] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-7)


def test_group_advantages_normalise_within_groups_and_drop_flat_groups():
    r = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 3.0]])
    a = group_advantages(r)
    assert np.allclose(a[0], [1, -1, 1, -1])
    assert (a[1] == 0).all()
    assert np.allclose(a[2], [-1 / np.sqrt(3)] * 3 + [np.sqrt(3)])
    assert np.allclose(a.mean(1), 0)


def test_sampling_follows_the_distribution_and_is_seeded():
    logp = np.log(np.tile([[0.1, 0.6, 0.3]], (60_000, 1)))
    s = sample(logp, np.random.default_rng(0))
    assert np.allclose(np.bincount(s, minlength=3) / s.size, [0.1, 0.6, 0.3], atol=0.01)
    assert (s == sample(logp, np.random.default_rng(0))).all()


def test_adam_first_step_moves_each_parameter_by_lr():
    p = [np.array([1.0, -2.0])]
    Adam(p, lr=0.1).step([np.array([3.0, -0.5])])
    assert np.allclose(p[0], [0.9, -1.9])


def test_features_encode_the_neighbourhood():
    p = generate(4, 50, seed=0)
    x = features(p, 0)
    assert x.shape == (50, N_FEATURES)
    i, t = 0, p.order[0, 0]
    # offset +1 block: [intact flag, scaled value, one-hot]
    block = x[i, 4 * (N_VALUES + 2) : 5 * (N_VALUES + 2)]
    if t + 1 < 12 and not p.broken[i, t + 1]:
        assert block[0] == 1 and block[2 + p.shown[i, t + 1]] == 1
    else:
        assert block.sum() == 0
