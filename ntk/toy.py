"""The NTK-parameterised masked-LM toy model of the Appendix A lemma checks.

Testbed of the Appendix A checks of arXiv 2604.05217 (our reading, ``docs/ntk.md``): token
embeddings ``E [V + 1, d]`` (row ``V`` is ``[MASK]``), learned positions ``p [n, d]``, optionally
one attention layer, a two-layer MLP and an MLM head, all in NTK parameterisation (weights
``N(0, 1)``, every matmul divided by ``sqrt(fan_in)``; Jacot et al., arXiv 1806.07572), so that
the width ``d`` can be swept towards the lazy (kernel) limit.

Every position is predicted with its own token masked, in one pass:

* ``"mlp"`` (the simpler variant): ``h_i = E[MASK] + p_i`` and
  ``z_i = W2^T phi(W1^T h_i / sqrt(d)) / sqrt(d)`` ``[V]``. The output at ``i`` sees no context,
  so the expected MLM loss is exact given ``P``:
  ``L = sum_i sum_w P_iw (-log softmax(z_i)_w)``.
* ``"attention"``: the masked slot ``x~_i = E[MASK] + p_i`` queries the other positions
  ``x_k = E[t_k] + p_k`` (``k != i``, i.e. position ``i`` masked in turn):
  ``h_i = x~_i + sum_k a_ik W_v^T x_k / sqrt(d)``, ``a_i = softmax_k(q_i . k_k * s)`` with
  ``q = W_q^T x~ / sqrt(d)``, ``k = W_k^T x / sqrt(d)`` and ``s = 1/d`` (``"linear"``, the scaling with
  a kernel limit, as neural-tangents' ``linear_scaling``) or ``1/sqrt(d)`` (``"sqrt"``); then the
  same MLP head. The loss is the cross-entropy against per-sequence target distributions.

Reading choices (fields of :class:`ToyConfig`, recorded in results): the variant, the
activation, the position init scale (``0`` = the common initialisation of the conjecture), the
attention scaling and the loss reduction (sum over positions, mean over sequences).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["ToyConfig", "init_params", "logits", "expected_mlm_loss", "sequence_mlm_loss"]

_ACT = {"gelu": jax.nn.gelu, "relu": jax.nn.relu, "tanh": jnp.tanh, "erf": jax.scipy.special.erf}


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    """Configuration of the toy MLM model.

    Attributes:
      num_positions: ``n`` learned positions.
      vocab_size: ``V`` (the ``[MASK]`` id is ``V``).
      width: ``d`` (model and hidden width; the swept quantity).
      variant: ``"mlp"`` or ``"attention"`` (see module docstring).
      activation: one of ``gelu``, ``relu``, ``tanh``, ``erf``.
      pe_init_std: std of the initial positions (``0``: all positions start equal).
      attention_scaling: ``"linear"`` (``1/d``) or ``"sqrt"`` (``1/sqrt(d)``) logit scaling.
      parameterization: ``"ntk"`` (readout ``/ sqrt(d)``: lazy as ``d`` grows) or
        ``"mean_field"`` (readout ``/ d``, Mei et al., arXiv 1804.06561: features keep moving at
        every width when the step size is scaled by ``d``; the premise of the lazy-regime
        lemmas fails).
    """

    num_positions: int = 16
    vocab_size: int = 50
    width: int = 256
    variant: str = "mlp"
    activation: str = "gelu"
    pe_init_std: float = 0.0
    attention_scaling: str = "linear"
    parameterization: str = "ntk"

    def __post_init__(self):
        for name in ("num_positions", "vocab_size", "width"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ToyConfig.{name} must be positive, got {getattr(self, name)}")
        if self.variant not in ("mlp", "attention"):
            raise ValueError(f"ToyConfig.variant must be 'mlp' or 'attention', got "
                             f"{self.variant!r}")
        if self.activation not in _ACT:
            raise ValueError(f"ToyConfig.activation must be one of {sorted(_ACT)}, got "
                             f"{self.activation!r}")
        if self.pe_init_std < 0:
            raise ValueError(f"ToyConfig.pe_init_std must be >= 0, got {self.pe_init_std}")
        if self.parameterization not in ("ntk", "mean_field"):
            raise ValueError(f"ToyConfig.parameterization must be 'ntk' or 'mean_field', got "
                             f"{self.parameterization!r}")
        if self.attention_scaling not in ("linear", "sqrt"):
            raise ValueError(f"ToyConfig.attention_scaling must be 'linear' or 'sqrt', got "
                             f"{self.attention_scaling!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def init_params(key: jax.Array, cfg: ToyConfig) -> dict[str, jax.Array]:
    """NTK-parameterised initial parameters: every weight ``N(0, 1)``, positions
    ``pe_init_std * N(0, 1)``.

    Returns:
      dict with ``E [V+1, d]``, ``P [n, d]``, ``W1 [d, d]``, ``W2 [d, V]`` and, for the
      attention variant, ``Wq, Wk, Wv [d, d]``.
    """
    d, v, n = cfg.width, cfg.vocab_size, cfg.num_positions
    names = ["E", "P", "W1", "W2"] + (["Wq", "Wk", "Wv"] if cfg.variant == "attention" else [])
    shapes = {"E": (v + 1, d), "P": (n, d), "W1": (d, d), "W2": (d, v),
              "Wq": (d, d), "Wk": (d, d), "Wv": (d, d)}
    keys = jax.random.split(key, len(names))
    params = {k: jax.random.normal(kk, shapes[k], jnp.float32) for k, kk in zip(names, keys)}
    params["P"] = cfg.pe_init_std * params["P"]
    return params


def _head(params, h, cfg: ToyConfig):
    """MLP head ``[..., d] -> [..., V]`` (readout ``/ sqrt(d)``, or ``/ d`` for mean field)."""
    s = 1.0 / math.sqrt(cfg.width)
    out = 1.0 / cfg.width if cfg.parameterization == "mean_field" else s
    return (_ACT[cfg.activation]((h @ params["W1"]) * s) @ params["W2"]) * out


def logits(params: dict[str, jax.Array], tokens: jax.Array | None, cfg: ToyConfig, *,
           detach_context: bool = False) -> jax.Array:
    """MLM logits with every position masked in turn.

    Args:
      params: from :func:`init_params`.
      tokens: ``[M, n]`` int token ids (the context; ignored, and may be None, for ``"mlp"``).
      cfg: the model configuration.
      detach_context: stop gradients through the positions used as keys / values, so that
        ``d/dp_i`` only follows the masked slot ``i`` (attention variant).

    Returns:
      ``[n, V]`` for ``"mlp"``; ``[M, n, V]`` for ``"attention"``.
    """
    d = cfg.width
    xq = params["E"][cfg.vocab_size] + params["P"]                      # [n, d] masked slots
    if cfg.variant == "mlp":
        return _head(params, xq, cfg)
    tokens = jnp.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] != cfg.num_positions:
        raise ValueError(f"tokens must be [M, {cfg.num_positions}], got {tokens.shape}")
    s = 1.0 / math.sqrt(d)
    # W^T x_k = (W^T E)[t_k] + (W^T P)[k]: project the V + n rows once, then gather.
    def project(w):
        pos = jax.lax.stop_gradient(params["P"]) if detach_context else params["P"]
        return (params["E"] @ w) * s, (pos @ w) * s
    ek, pk = project(params["Wk"])
    ev, pv = project(params["Wv"])
    k = ek[tokens] + pk[None]                                           # [M, n, d]
    v = ev[tokens] + pv[None]
    q = (xq @ params["Wq"]) * s                                         # [n, d]
    scale = 1.0 / d if cfg.attention_scaling == "linear" else s
    scores = jnp.einsum("id,mjd->mij", q, k) * scale
    n = cfg.num_positions
    scores = jnp.where(jnp.eye(n, dtype=bool)[None], -jnp.inf, scores)  # position i is masked
    attn = jax.nn.softmax(scores, axis=-1)
    h = xq[None] + jnp.einsum("mij,mjd->mid", attn, v)
    return _head(params, h, cfg)


def expected_mlm_loss(params: dict[str, jax.Array], P: jax.Array, cfg: ToyConfig) -> jax.Array:
    """Exact expected MLM loss of the ``"mlp"`` variant: ``sum_i H(P_i, softmax(z_i))``."""
    if cfg.variant != "mlp":
        raise ValueError("expected_mlm_loss needs the context-free 'mlp' variant")
    logp = jax.nn.log_softmax(logits(params, None, cfg), axis=-1)
    return -jnp.sum(P * logp)


def sequence_mlm_loss(params: dict[str, jax.Array], tokens: jax.Array, targets: jax.Array,
                      cfg: ToyConfig, *, detach_context: bool = False) -> jax.Array:
    """Mean over sequences of ``sum_i H(target_mi, softmax(z_mi))``.

    Args:
      tokens: ``[M, n]`` contexts.
      targets: ``[M, n, V]`` target distributions of each masked token (one-hot, or the exact
        conditional law of the masked token given its context).
      detach_context: see :func:`logits`.
    """
    z = logits(params, tokens, cfg, detach_context=detach_context)
    logp = jax.nn.log_softmax(z, axis=-1)
    if logp.ndim == 2:
        logp = logp[None]
    return -jnp.sum(targets * logp) / targets.shape[0]
