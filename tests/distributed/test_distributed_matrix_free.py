"""Matrix-free MDS and stress with the rows of sqrt(P) split over 4 fake CPU devices.

The checks run in a subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (the
flag must be set before JAX is imported) and are compared there with the one-device results.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from _sharded_run import run_on_fake_devices  # noqa: E402  (tests/distributed on sys.path)


def run_checks() -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import posjax.geometry as geo
    from posjax import distributed as dist

    rng = np.random.default_rng(0)
    n, V = 203, 37  # n not a multiple of 4: padded rows must not count
    P = rng.dirichlet(np.full(V, 0.3), size=n) * 0.5 + np.linspace(0, 1, n)[:, None] * 0.5 / V
    P = P / P.sum(1, keepdims=True)
    X = 0.3 * rng.standard_normal((n, 3))
    out: dict = {"devices": len(jax.devices())}
    for name, mesh in (("rows4", dist.row_mesh()), ("mesh2x2", dist.make_mesh(2, 2))):
        R = dist.sharded_sqrt_rows(P, mesh=mesh)
        r0 = geo.mds_from_distributions(P, 5)
        r1 = dist.sharded_mds_from_distributions(P, 5, mesh=mesh)
        res = {"S_rows": int(R.n_rows), "S_spec": [str(a) for a in R.S.sharding.spec],
               "eig": float(np.max(np.abs(r0.eigenvalues - r1.eigenvalues) / r0.eigenvalues)),
               "coords": float(jnp.max(jnp.abs(r0.coords - r1.coords)))}
        for scale in ("raw", "optimal"):
            s0 = geo.stress_from_distributions(P, X, scale=scale, block_size=24)
            s1 = dist.sharded_stress_from_distributions(P, X, scale=scale, mesh=mesh,
                                                        block_size=24)
            e0 = geo.stress_from_distributions(P, X, scale=scale, pairs=5000, seed=2)
            e1 = dist.sharded_stress_from_distributions(P, X, scale=scale, pairs=5000, seed=2,
                                                        mesh=mesh)
            dense = float(geo.stress(geo.hellinger_matrix(P), coords=X, scale=scale))
            res[scale] = {"exact": abs(s1 - s0) / s0, "dense": abs(s0 - dense) / dense,
                          "sampled": abs(e1.value - e0.value) / e0.value,
                          "half": abs(e1.half_width - e0.half_width) / e0.half_width}
        out[name] = res
    return out


@pytest.fixture(scope="module")
def results() -> dict:
    return run_on_fake_devices(__file__)


@pytest.mark.parametrize("mesh", ["rows4", "mesh2x2"])
def test_sharded_matrix_free_matches_one_device(results, mesh):
    assert results["devices"] == 4
    r = results[mesh]
    assert r["S_rows"] == 204  # 203 rows padded to a multiple of 4, split by rows
    assert r["S_spec"][0] != "None"
    assert r["eig"] <= 1e-10 and r["coords"] <= 1e-9
    for scale in ("raw", "optimal"):
        assert r[scale]["exact"] <= 1e-10 and r[scale]["dense"] <= 1e-10
        assert r[scale]["sampled"] <= 1e-10 and r[scale]["half"] <= 1e-8


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    print(json.dumps(run_checks()))
