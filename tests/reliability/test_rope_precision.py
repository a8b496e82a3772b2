"""RoPE angles stay accurate in float32 up to position 2^20 (checked against float64)."""
import jax.numpy as jnp
import numpy as np
import pytest

from posjax import encodings
from posjax.encodings.rope import RoPE, apply_rope, rope_angles, rope_frequencies

BOUND = 1e-5  # |rope32(x) - rope64(x)| <= BOUND |x|, fixed before the first run
POSITIONS = np.concatenate([np.arange(0, 2**20, 4099), [2**20 - 1, 2**20, -3, -(2**20) + 7]])


def _rope64(x, positions, theta):
    """Half-split RoPE in NumPy float64."""
    half = x.shape[-1] // 2
    ang = positions[:, None, None].astype(np.float64) * np.asarray(theta, np.float64)
    a, b = x[..., :half].astype(np.float64), x[..., half:].astype(np.float64)
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), a * np.sin(ang) + b * np.cos(ang)], -1)


def _error(y, x, positions, theta):
    ref = _rope64(x, positions, theta)
    return float(np.max(np.linalg.norm(np.asarray(y, np.float64) - ref, axis=-1)
                        / np.linalg.norm(x, axis=-1)))


def _x(n, d=64):
    return np.random.default_rng(0).standard_normal((n, 2, d)).astype(np.float32)


def test_rope_is_accurate_to_float64_up_to_position_2_20():
    x = _x(len(POSITIONS))
    y = apply_rope(jnp.asarray(x), jnp.asarray(POSITIONS, jnp.int32), interleaved=False)
    assert _error(y, x, POSITIONS, rope_frequencies(64, 10000.0, np.float64)) <= BOUND


def test_naive_float32_angles_fail_the_bound():  # negative control: the test can fail
    x = _x(len(POSITIONS))
    theta = np.asarray(rope_frequencies(64, 10000.0))
    ang = jnp.asarray(POSITIONS, jnp.float32)[:, None] * jnp.asarray(theta)
    half = 32
    a, b = x[..., :half], x[..., half:]
    c, s = np.asarray(jnp.cos(ang))[:, None], np.asarray(jnp.sin(ang))[:, None]
    y = np.concatenate([a * c - b * s, a * s + b * c], -1)
    assert _error(y, x, POSITIONS, rope_frequencies(64, 10000.0, np.float64)) > 100 * BOUND


def test_fractional_and_negative_positions():
    rng = np.random.default_rng(1)
    pos = rng.uniform(-(2**20), 2**20, 512).astype(np.float32)
    theta = rope_frequencies(64, 10000.0, np.float64)
    ang = np.asarray(rope_angles(jnp.asarray(pos), theta), np.float64)
    wrapped = np.angle(np.exp(1j * (ang - pos[:, None].astype(np.float64) * theta)))
    assert np.max(np.abs(wrapped)) <= BOUND
    assert np.max(np.abs(ang)) <= np.pi + 1e-5  # reduced angles


def test_position_scale_keeps_the_bound():
    x = _x(len(POSITIONS))
    y = apply_rope(jnp.asarray(x), jnp.asarray(POSITIONS, jnp.int32), interleaved=False,
                   position_scale=0.25)
    assert _error(y, x, POSITIONS, rope_frequencies(64, 10000.0, np.float64) * 0.25) <= BOUND


ROPE_PES = [n for n in encodings.names() if issubclass(encodings.info(n).module, RoPE)]


@pytest.mark.parametrize("name", ROPE_PES)
def test_every_rope_family_pe_frequencies_rotate_accurately(name):
    """The shared angle function with each RoPE-family PE's own frequencies (their float32 or
    float64 values), against float64 rotation by the same values."""
    pe = encodings.make(name, d_model=128, num_heads=2, max_len=64)
    theta = pe.frequencies()
    d = 2 * np.shape(theta)[0]
    x = _x(len(POSITIONS), d)
    y = apply_rope(jnp.asarray(x), jnp.asarray(POSITIONS, jnp.int32), interleaved=False,
                   frequencies=theta)
    assert _error(y, x, POSITIONS, np.asarray(theta, np.float64)) <= BOUND
