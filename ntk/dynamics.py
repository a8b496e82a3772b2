"""Training dynamics of the toy MLM model: exact vs linearised gradient descent, and the
expected positional gradient on two corpora (Appendix A of arXiv 2604.05217, reconstruction).

* :func:`train_mlp_toy` - full-batch gradient descent on the exact expected MLM loss of the
  context-free toy (``P`` known exactly), either on the network itself or on its first-order
  Taylor expansion around the initialisation (neural-tangents ``linearize``: the lazy / NTK
  dynamics, Lee et al., arXiv 1902.06720).
* :func:`positional_gradient` - ``E[grad_p loss]`` ``[n, d]`` on a corpus of contexts with
  per-token target distributions (attention toy).
* :func:`comonotone_corpus` / :func:`shuffle_columns` / :func:`comonotone_targets` - two corpora
  with identical per-position empirical marginals but different joint structure, and the
  exact conditional law of each masked token given its context (used as the MLM target, which
  removes the target's sampling noise without changing the expected gradient).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ntk import toy
from ntk.recording import neural_tangents

__all__ = ["train_mlp_toy", "positional_gradient", "comonotone_corpus", "shuffle_columns",
           "comonotone_targets"]


@functools.partial(jax.jit, static_argnames=("cfg", "steps", "record_every", "linearized"))
def _train(params0, P, lr, *, cfg: toy.ToyConfig, steps: int, record_every: int,
           linearized: bool):
    apply = lambda p, x: toy.logits(p, None, cfg)
    f = neural_tangents().linearize(apply, params0) if linearized else apply

    def loss(p):
        return -jnp.sum(P * jax.nn.log_softmax(f(p, None), axis=-1))

    def step(p, _):
        value, g = jax.value_and_grad(loss)(p)
        return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), value

    def chunk(p, _):
        p, losses = jax.lax.scan(step, p, None, length=record_every)
        return p, (losses, p["P"], f(p, None))

    params, (losses, snaps, logit_snaps) = jax.lax.scan(chunk, params0, None,
                                                        length=steps // record_every)
    return params, losses.reshape(-1), snaps, logit_snaps, loss(params)


def train_mlp_toy(params0: dict, cfg: toy.ToyConfig, P, *, steps: int, lr: float,
                  linearized: bool = False, record_every: int | None = None) -> dict:
    """Gradient descent on the exact expected MLM loss ``sum_i H(P_i, softmax(z_i))``.

    Args:
      params0: initial parameters (:func:`ntk.toy.init_params`, ``variant="mlp"``).
      cfg: toy configuration.
      P: ``[n, V]`` exact positional distributions.
      steps: number of full-batch GD steps; lr: step size.
      linearized: train ``f_lin(theta) = f(theta0) + J(theta0)(theta - theta0)`` (NT
        ``linearize``) instead of ``f``.
      record_every: snapshot the positions every this many steps (default: only at the end);
        must divide ``steps``.

    Returns:
      ``{"params", "losses" [steps], "final_loss", "snapshots" [steps/record_every, n, d],
      "logit_snapshots" [steps/record_every, n, V]}`` (positions and logits after every
      ``record_every`` steps; the logits of the linearised model when ``linearized``).
    """
    if cfg.variant != "mlp":
        raise ValueError("train_mlp_toy needs the context-free 'mlp' toy variant")
    if steps <= 0 or lr <= 0:
        raise ValueError(f"steps and lr must be positive, got steps={steps}, lr={lr}")
    record_every = steps if record_every is None else int(record_every)
    if record_every <= 0 or steps % record_every:
        raise ValueError(f"record_every={record_every} must divide steps={steps}")
    P = jnp.asarray(P, jnp.float32)
    if P.shape != (cfg.num_positions, cfg.vocab_size):
        raise ValueError(f"P must be {(cfg.num_positions, cfg.vocab_size)}, got {P.shape}")
    params, losses, snaps, logit_snaps, final = _train(
        params0, P, jnp.float32(lr), cfg=cfg, steps=steps, record_every=record_every,
        linearized=linearized)
    return {"params": params, "losses": np.asarray(losses), "final_loss": float(final),
            "snapshots": np.asarray(snaps), "logit_snapshots": np.asarray(logit_snaps)}


@functools.partial(jax.jit, static_argnames=("cfg", "chunk", "detach_context"))
def _grad_P(params, tokens, targets, *, cfg: toy.ToyConfig, chunk: int, detach_context: bool):
    def one(args):
        tok, tgt = args
        return jax.grad(lambda p: toy.sequence_mlm_loss(
            {**params, "P": p}, tok, tgt, cfg, detach_context=detach_context)
            * tok.shape[0])(params["P"])
    m = tokens.shape[0]
    grads = jax.lax.map(one, (tokens.reshape(m // chunk, chunk, -1),
                              targets.reshape(m // chunk, chunk, *targets.shape[1:])))
    return grads.sum(0) / m


def positional_gradient(params: dict, tokens, targets, cfg: toy.ToyConfig, *,
                        chunk: int = 64, detach_context: bool = False) -> np.ndarray:
    """Mean positional gradient ``(1/M) sum_m grad_p sum_i H(target_mi, softmax(z_mi))``.

    Args:
      tokens: ``[M, n]`` contexts (``M`` divisible by ``chunk``); targets: ``[M, n, V]``.
      detach_context: only the path through each masked slot (see :func:`ntk.toy.logits`).

    Returns:
      ``[n, d]`` float64 numpy array.
    """
    tokens = jnp.asarray(tokens)
    targets = jnp.asarray(targets, jnp.float32)
    if tokens.shape[0] % chunk:
        raise ValueError(f"the number of sequences {tokens.shape[0]} must be divisible by "
                         f"chunk={chunk}")
    return np.asarray(_grad_P(params, tokens, targets, cfg=cfg, chunk=chunk,
                              detach_context=detach_context), np.float64)


def comonotone_corpus(P, num_sequences: int, *, seed: int = 0) -> np.ndarray:
    """Sequences whose tokens share one uniform: ``t_i = F_i^{-1}(U)`` (comonotone coupling).

    Each position's marginal is exactly ``P_i``; the joint is maximally dependent.

    Returns:
      ``[M, n]`` int32 tokens.
    """
    P = np.asarray(P, np.float64)
    cdf = np.cumsum(P, axis=1)
    u = np.random.default_rng(seed).uniform(size=num_sequences) * cdf[:, -1].min()
    tok = np.stack([np.searchsorted(c, u, side="right") for c in cdf], axis=1)
    return np.minimum(tok, P.shape[1] - 1).astype(np.int32)


def shuffle_columns(tokens, *, seed: int = 0) -> np.ndarray:
    """Permute each position's column independently: identical per-position empirical
    marginals, independent joint."""
    tokens = np.asarray(tokens)
    rng = np.random.default_rng(seed)
    return np.stack([tokens[rng.permutation(len(tokens)), i] for i in range(tokens.shape[1])],
                    axis=1)


def comonotone_targets(P, tokens) -> np.ndarray:
    """Exact law of each masked token given the others under the comonotone coupling.

    Given the context, ``U`` is uniform on ``[lo, hi) = cap_{k != i} [F_k(t_k - 1), F_k(t_k))``,
    so ``Pr(t_i = w | ctx) = |[F_i(w - 1), F_i(w)) cap [lo, hi)| / (hi - lo)``.

    Returns:
      ``[M, n, V]`` float64 target distributions.
    """
    P = np.asarray(P, np.float64)
    tokens = np.asarray(tokens)
    n = P.shape[0]
    hi_c = np.cumsum(P, axis=1)
    lo_c = hi_c - P
    pos = np.arange(n)
    lo_k = lo_c[pos, tokens]                                   # [M, n]
    hi_k = hi_c[pos, tokens]
    eye = np.eye(n, dtype=bool)[None]
    lo = np.where(eye, -np.inf, lo_k[:, None, :]).max(-1)      # [M, n], excluding k = i
    hi = np.where(eye, np.inf, hi_k[:, None, :]).min(-1)
    mass = (np.minimum(hi[..., None], hi_c[None]) - np.maximum(lo[..., None], lo_c[None]))
    mass = np.clip(mass, 0.0, None)
    total = mass.sum(-1, keepdims=True)
    if np.any(total <= 0):
        raise ValueError("tokens are not consistent with a comonotone coupling of P")
    return mass / total
