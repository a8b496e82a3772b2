"""The toy MLM model, its training dynamics and the two-corpus construction."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import dynamics, toy

N, V = 6, 7


@pytest.fixture(scope="module")
def P():
    return np.random.default_rng(0).dirichlet(np.full(V, 0.5), size=N)


def test_config_validation():
    with pytest.raises(ValueError, match="variant"):
        toy.ToyConfig(variant="rnn")
    with pytest.raises(ValueError, match="width"):
        toy.ToyConfig(width=0)


def test_attention_toy_masks_each_position_in_turn():
    cfg = toy.ToyConfig(num_positions=N, vocab_size=V, width=16, variant="attention",
                        pe_init_std=1.0)
    params = toy.init_params(jax.random.PRNGKey(0), cfg)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (3, N), 0, V)
    z = toy.logits(params, tokens, cfg)
    assert z.shape == (3, N, V)
    # The prediction at position i does not depend on the token at i ...
    changed = tokens.at[:, 2].set((tokens[:, 2] + 1) % V)
    z2 = toy.logits(params, changed, cfg)
    np.testing.assert_allclose(z2[:, 2], z[:, 2], atol=1e-6)
    # ... but the other positions see it.
    assert float(jnp.abs(z2[:, 0] - z[:, 0]).max()) > 1e-4


def test_ntk_parameterisation_keeps_outputs_order_one():
    stds = []
    for width in (64, 1024):
        cfg = toy.ToyConfig(num_positions=N, vocab_size=V, width=width)
        stds.append(float(jnp.std(toy.logits(toy.init_params(jax.random.PRNGKey(0), cfg),
                                             None, cfg))))
    assert 0.1 < stds[0] < 3 and 0.1 < stds[1] < 3


def test_expected_loss_equals_sequence_loss_with_exact_targets(P):
    cfg = toy.ToyConfig(num_positions=N, vocab_size=V, width=32, pe_init_std=0.5)
    params = toy.init_params(jax.random.PRNGKey(0), cfg)
    exact = toy.expected_mlm_loss(params, jnp.asarray(P), cfg)
    seq = toy.sequence_mlm_loss(params, jnp.zeros((1, N), jnp.int32), jnp.asarray(P)[None], cfg)
    assert float(exact) == pytest.approx(float(seq), rel=1e-6)


def test_training_and_linearisation(P):
    cfg = toy.ToyConfig(num_positions=N, vocab_size=V, width=64)
    p0 = toy.init_params(jax.random.PRNGKey(0), cfg)
    ex = dynamics.train_mlp_toy(p0, cfg, P, steps=20, lr=0.05, record_every=10)
    lin = dynamics.train_mlp_toy(p0, cfg, P, steps=20, lr=0.05, linearized=True)
    assert ex["losses"][0] > ex["final_loss"]
    assert ex["snapshots"].shape == (2, N, 64)
    np.testing.assert_allclose(ex["snapshots"][-1], np.asarray(ex["params"]["P"]))
    # One tiny step: exact and linearised updates agree to first order.
    a = dynamics.train_mlp_toy(p0, cfg, P, steps=1, lr=1e-3)["params"]["P"]
    b = dynamics.train_mlp_toy(p0, cfg, P, steps=1, lr=1e-3, linearized=True)["params"]["P"]
    np.testing.assert_allclose(a, b, atol=1e-7)
    dp, dl = np.asarray(ex["params"]["P"]), np.asarray(lin["params"]["P"])
    assert 0 < np.linalg.norm(dp - dl) < np.linalg.norm(dp)
    with pytest.raises(ValueError, match="divide"):
        dynamics.train_mlp_toy(p0, cfg, P, steps=10, lr=0.1, record_every=3)


def test_comonotone_corpus_and_conditional_targets(P):
    tokens = dynamics.comonotone_corpus(P, 20000, seed=0)
    assert tokens.shape == (20000, N)
    onehot = np.eye(V)[tokens]
    np.testing.assert_allclose(onehot.mean(0), P, atol=0.015)      # exact marginals, sampled
    targets = dynamics.comonotone_targets(P, tokens[:500])
    np.testing.assert_allclose(targets.sum(-1), 1.0, atol=1e-12)
    own = np.take_along_axis(targets, tokens[:500, :, None], axis=-1)[..., 0]
    assert np.all(own > 0)                         # the realised token is always possible
    # Averaging the conditional laws over contexts gives back the marginal P_i.
    np.testing.assert_allclose(dynamics.comonotone_targets(P, tokens).mean(0), P, atol=0.015)
    shuffled = dynamics.shuffle_columns(tokens, seed=1)
    for i in range(N):
        np.testing.assert_array_equal(np.sort(shuffled[:, i]), np.sort(tokens[:, i]))
    assert np.mean(np.all(shuffled == tokens, axis=1)) < 0.5


def test_positional_gradient_matches_autodiff_and_control(P):
    cfg = toy.ToyConfig(num_positions=N, vocab_size=V, width=16, variant="attention")
    params = toy.init_params(jax.random.PRNGKey(0), cfg)
    tokens = dynamics.comonotone_corpus(P, 128, seed=0)
    targets = dynamics.comonotone_targets(P, tokens)
    g = dynamics.positional_gradient(params, tokens, targets, cfg, chunk=64)
    ref = jax.grad(lambda p: toy.sequence_mlm_loss({**params, "P": p}, tokens,
                                                   jnp.asarray(targets, jnp.float32), cfg))(
        params["P"])
    np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-6)
    # Context-free control: identical empirical marginals give identical gradients.
    mcfg = toy.ToyConfig(num_positions=N, vocab_size=V, width=16)
    m0 = toy.init_params(jax.random.PRNGKey(0), mcfg)
    shuffled = dynamics.shuffle_columns(tokens, seed=1)
    ga = dynamics.positional_gradient(m0, tokens, np.eye(V)[tokens], mcfg)
    gb = dynamics.positional_gradient(m0, shuffled, np.eye(V)[shuffled], mcfg)
    np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-7)
