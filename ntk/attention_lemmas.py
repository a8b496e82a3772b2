"""Lemmas 1, 3 and 4 of arXiv 2604.05217 (Appendix A, our readings in ``docs/interpretations.md``)
beyond the context-free toy: a one-layer posjax ``Transformer`` with a learned PE.

Work in progress: the settings live in :class:`AttentionLemmaConfig`
(``SweepConfig.attention``).
"""
from __future__ import annotations

import dataclasses

__all__ = ["AttentionLemmaConfig"]


@dataclasses.dataclass(frozen=True)
class AttentionLemmaConfig:
    """Settings of the attention-model lemma checks (``SweepConfig.attention``).

    Attributes:
      widths / seeds: the width sweep (``d_model``) and seeds.
    """

    widths: tuple[int, ...] = (64, 128, 256, 512)
    seeds: tuple[int, ...] = (0, 1)
