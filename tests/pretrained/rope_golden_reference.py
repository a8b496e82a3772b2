"""Produce the golden RoPE values of ``test_rope_config.py`` with the reference library.

Not part of the test suite (it needs PyTorch and Hugging Face ``transformers``, which posjax does
not depend on). Run it once in a throwaway environment, e.g.::

    python -m venv /tmp/hfref && /tmp/hfref/bin/pip install torch==2.13.0 transformers==5.18.0
    /tmp/hfref/bin/python tests/pretrained/rope_golden_reference.py

It prints, for every config in ``CASES``, the inverse frequencies and the attention factor that
``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` computes (at the given sequence length),
as the Python literals pasted into ``GOLDEN``.
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _rope_cases import CASES  # noqa: E402


def main() -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    out = {}
    for name, (config, seq_len) in CASES.items():
        cfg = LlamaConfig(**copy.deepcopy(config))
        params = cfg.rope_parameters
        rope_type = params.get("rope_type", "default")
        if rope_type == "default":
            dim = int(cfg.head_dim * params.get("partial_rotary_factor", 1.0))
            import torch
            inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2).float() / dim))
            factor = 1.0
        else:
            inv, factor = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu", seq_len)
        out[name] = {"inv_freq": [float(f"{v:.9g}") for v in inv.tolist()],
                     "attention_factor": float(factor)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
