"""NumPy float64 building blocks of the per-PE reference computations (written for the tests,
independent of posjax): the 2-D rotation of coordinate pairs that every rotary formula uses."""
from __future__ import annotations

import numpy as np


def np_rotate(x: np.ndarray, angles: np.ndarray, *, interleaved: bool) -> np.ndarray:
    """Rotate the coordinate pairs of ``x [..., 2n]`` by ``angles [..., n]`` (float64).

    Pair k is (x_2k, x_2k+1) when ``interleaved`` (RoFormer, arXiv 2104.09864 Eq. (34)) and
    (x_k, x_k+n) otherwise (half-split); (a, b) -> (a cos t - b sin t, a sin t + b cos t).
    """
    x = np.asarray(x, np.float64)
    n = x.shape[-1] // 2
    out = np.empty_like(x)
    for k in range(n):
        i, j = (2 * k, 2 * k + 1) if interleaved else (k, k + n)
        c, s = np.cos(angles[..., k]), np.sin(angles[..., k])
        out[..., i] = x[..., i] * c - x[..., j] * s
        out[..., j] = x[..., i] * s + x[..., j] * c
    return out


def random_qk(seed: int, b: int, t: int, h: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 random queries and keys ``[b, t, h, d]``."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((b, t, h, d)), rng.standard_normal((b, t, h, d))


def np_layernorm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """LayerNorm over the last axis (Ba et al., arXiv 1607.06450, Eq. (4)), float64."""
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * scale + bias


def np_rope(x: np.ndarray, pos: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """RoFormer's rotation (arXiv 2104.09864, Sec. 3.4.2), interleaved pairs, float64."""
    theta = base ** (-2.0 * np.arange(x.shape[-1] // 2) / x.shape[-1])
    return np_rotate(x, pos[..., :, None, None] * theta, interleaved=True)


def expm_skew64(a: np.ndarray) -> np.ndarray:
    """exp(a) of a real skew matrix through the eigen-decomposition of the Hermitian i a."""
    w, v = np.linalg.eigh(1j * a)
    return (v @ np.diag(np.exp(-1j * w)) @ v.conj().T).real
