"""Regenerate ``attention_reference.npz``: analytic attention kernels from neural-tangents run
natively (its own package ``__init__``, no compatibility layer) on the JAX it was released for.

Environment used (a throwaway virtualenv, never a runtime dependency of posjax):

    uv venv -p 3.11 /tmp/ntold
    VIRTUAL_ENV=/tmp/ntold uv pip install jax==0.4.30 jaxlib==0.4.30 'numpy<2' scipy \
        frozendict tensorflow-cpu==2.16.2 tf2jax
    VIRTUAL_ENV=/tmp/ntold uv pip install --no-deps neural-tangents==0.6.5
    /tmp/ntold/bin/python tests/ntk/data/make_attention_reference.py

The network is the one :func:`ntk.attention.attention_network` builds (``Dense ->
GlobalSelfAttention -> Relu -> GlobalAvgPool -> Dense``, NTK parameterisation), for three
settings of the attention layer's positional embedding; float64 throughout.
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import neural_tangents as nt  # noqa: E402  (native import: its __init__ and TensorFlow)
from neural_tangents import stax  # noqa: E402

CASES = {
    "none": dict(pos_emb_type="NONE", decay=False, W_std=1.0, b_std=0.0, val_pos_emb=False),
    "sum_decay": dict(pos_emb_type="SUM", decay=True, W_std=1.0, b_std=0.0, val_pos_emb=False),
    "sum_decay_values": dict(pos_emb_type="SUM", decay=True, W_std=1.3, b_std=0.2,
                             val_pos_emb=True),
}


def network(pos_emb_type, decay, W_std, b_std, val_pos_emb):
    decay_fn = (lambda d: jnp.exp(-d / 4)) if decay else None
    return stax.serial(
        stax.Dense(1, W_std=W_std, b_std=b_std),
        stax.GlobalSelfAttention(
            n_chan_out=1, n_chan_key=1, n_chan_val=1, n_heads=1, linear_scaling=True,
            W_key_std=W_std, W_value_std=W_std, W_query_std=W_std, W_out_std=W_std,
            b_std=b_std, attention_mechanism="SOFTMAX", pos_emb_type=pos_emb_type,
            pos_emb_p_norm=2, pos_emb_decay_fn=decay_fn, n_chan_pos_emb=None,
            W_pos_emb_std=1.0, val_pos_emb=val_pos_emb),
        stax.Relu(), stax.GlobalAvgPool(), stax.Dense(1, W_std=W_std, b_std=b_std))


def main():
    x = np.random.default_rng(0).normal(size=(3, 5, 4))
    out = {"x": x}
    for name, case in CASES.items():
        _, _, kernel_fn = network(**case)
        k = kernel_fn(jnp.asarray(x), None, ("nngp", "ntk"))
        out[f"{name}_nngp"] = np.asarray(k.nngp)
        out[f"{name}_ntk"] = np.asarray(k.ntk)
    out["meta"] = np.array(json.dumps({
        "jax": jax.__version__, "neural_tangents": nt.__version__ if hasattr(nt, "__version__")
        else "0.6.5", "cases": CASES, "x": "numpy default_rng(0).normal(size=(3, 5, 4))"}))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_reference.npz")
    np.savez(path, **out)
    print("wrote", path, {k: v.shape for k, v in out.items()})


if __name__ == "__main__":
    main()
