"""T5 relative bias (Raffel et al., arXiv 1910.10683, Sec. 2.1): buckets against a NumPy
transcription of the bucketing rule, and the bias as a table lookup."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings import t5_bucket
from _pe_checks import make


def numpy_bucket(r, bidirectional=True, num_buckets=32, max_distance=128):
    """arXiv 1910.10683, Sec. 2.1 ("32 embeddings ... whose ranges increase in size
    logarithmically up to an offset of 128"): for offset r = j - i, half the buckets per sign
    when bidirectional (r > 0 offset by B/2), future keys in bucket 0 when causal; distances
    n < B_side / 2 own a bucket, larger ones share log-spaced buckets, the last one past 128."""
    n = -r
    ret = 0
    nb = num_buckets
    if bidirectional:
        nb //= 2
        ret += nb if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    exact = nb // 2
    if n < exact:
        return ret + n
    val = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (nb - exact))
    return ret + min(val, nb - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_follow_the_rule(bidirectional):
    r = np.array([-300, -128, -127, -64, -20, -9, -8, -7, -1, 0, 1, 5, 8, 9, 40, 127, 128, 500])
    got = np.asarray(t5_bucket(jnp.asarray(r), bidirectional=bidirectional))
    want = [numpy_bucket(int(x), bidirectional) for x in r]
    np.testing.assert_array_equal(got, want)


def test_bias_looks_up_the_bucket_table():
    pe = make("t5", causal=True, num_buckets=8, max_distance=16)
    i = j = np.arange(14)
    table = np.asarray(pe.bucket_table[...])  # [buckets, H]
    want = np.array([[[table[numpy_bucket(jj - ii, False, 8, 16), h] for jj in j] for ii in i]
                     for h in range(2)])
    np.testing.assert_array_equal(np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j))), want)
