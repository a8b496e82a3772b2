"""M-RoPE position layouts of multimodal prompts: the ``[T, 3]`` (t, h, w) positions of a
sequence of text, image, video and audio segments, as the Qwen-VL / Qwen-Omni models lay them
out (M-RoPE: Wang et al., arXiv 2409.12191, Sec. 2.1; time alignment: Qwen2.5-VL, arXiv
2502.13923, Sec. 2.1.2; audio-video interleaving: Qwen2.5-Omni, arXiv 2503.20215, Sec. 2.2).

Rules (the ones of Hugging Face's ``get_rope_index`` in ``modeling_qwen2_vl.py``,
``modeling_qwen2_5_vl.py``, ``modeling_qwen3_vl.py``; written from their semantics):

* A text (or audio) run of n tokens continues the 1-D counter: positions ``s, ..., s + n - 1``
  in all three components, where ``s`` is one past the largest position so far (0 at the start).
* An image (or a video) with patch grid ``(t, h, w)`` is merged ``m x m`` (``spatial_merge_size``)
  into ``t * (h/m) * (w/m)`` tokens in (t, row, column) order; token (i, r, c) gets
  ``s + (T_i, r, c)``. ``T_i = i`` for images and Qwen2-VL videos; with time alignment
  (Qwen2.5-VL) ``T_i = floor(i * seconds_per_grid * tokens_per_second)``, so the temporal
  position counts absolute time (``tokens_per_second`` position units per second), not frames.
  The next segment then starts one past the largest of these positions.
* Qwen3-VL splits a video into its frames (one grid of t = 1 each, separated by timestamp text):
  :func:`split_video_frames`.
* Audio alone is text-like. Audio inside a video (Qwen2.5-Omni ``use_audio_in_video``): the video's
  temporal positions use ``position_id_per_seconds`` units per second, the audio tokens get
  ``s + j`` (one per ``1 / position_id_per_seconds`` s), and both are cut into chunks of
  ``seconds_per_chunk`` seconds that alternate, video chunk first (``"chunked"``); or the two
  streams are merged in time order, video first at equal time (``"merged"``, a reading of the
  time-interleaved layout of Qwen3-Omni).

Segments are tuples: ``("text", n)``, ``("audio", n)``, ``("image", (t, h, w))``,
``("video", (t, h, w), seconds_per_grid)``, ``("video_audio", (t, h, w), seconds_per_grid,
n_audio)``. Grids are the vision encoder's patch grids (before the merge), as HF's
``image_grid_thw`` / ``video_grid_thw``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def _grid(segment, merge: int) -> tuple[int, int, int]:
    t, h, w = (int(v) for v in segment[1])
    if min(t, h, w) <= 0 or h % merge or w % merge:
        raise ValueError(f"{segment[0]} grid {(t, h, w)} must be positive with h and w divisible "
                         f"by spatial_merge_size={merge}")
    return t, h // merge, w // merge


def _vision(t, h, w, time_index) -> np.ndarray:
    """``[t h w, 3]`` (T_i, r, c) of a merged grid in (frame, row, column) order."""
    i, r, c = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    return np.stack([np.asarray(time_index)[i].ravel(), r.ravel(), c.ravel()], axis=-1)


def _time_index(t, seconds_per_grid, units_per_second) -> np.ndarray:
    if units_per_second is None:
        return np.arange(t)
    # floor of a float64 product, as HF's .long() of its float time tensor (exact for the
    # released values: integer or binary-fraction seconds per grid)
    return np.floor(np.arange(t) * float(seconds_per_grid) * float(units_per_second)).astype(
        np.int64)


def mrope_positions(segments: Sequence[tuple[Any, ...]], *, spatial_merge_size: int = 2,
                    tokens_per_second: float | None = None,
                    position_id_per_seconds: float = 25.0, seconds_per_chunk: float = 2.0,
                    audio_in_video: str = "chunked") -> tuple[np.ndarray, int]:
    """The M-RoPE positions of a prompt made of ``segments`` (module docstring).

    Args:
      segments: the prompt in order.
      spatial_merge_size: m, patches merged per side into one token (2 in Qwen2/2.5/3-VL).
      tokens_per_second: temporal position units per second of video (Qwen2.5-VL: 2); None: one
        per frame group (Qwen2-VL, and Qwen3-VL's per-frame grids).
      position_id_per_seconds, seconds_per_chunk: Qwen2.5-Omni's audio-video time units (25 per
        second) and chunk length (2 s).
      audio_in_video: "chunked" (Qwen2.5-Omni) or "merged" (time order).

    Returns:
      ``(positions [T, 3] int64, delta)``, ``delta = max position + 1 - T`` (HF's
      ``rope_deltas``: decoding continues at ``T + delta``).
    """
    if audio_in_video not in ("chunked", "merged"):
        raise ValueError(f"audio_in_video must be 'chunked' or 'merged', got {audio_in_video!r}")
    merge = int(spatial_merge_size)
    if merge < 1:
        raise ValueError(f"spatial_merge_size must be >= 1, got {spatial_merge_size}")
    parts: list[np.ndarray] = []
    start = 0
    for seg in segments:
        kind = seg[0]
        if kind in ("text", "audio"):
            n = int(seg[1])
            if n < 0:
                raise ValueError(f"{kind} segment length must be >= 0, got {n}")
            block = np.repeat((start + np.arange(n))[:, None], 3, axis=1)
        elif kind == "image":
            t, h, w = _grid(seg, merge)
            block = start + _vision(t, h, w, np.arange(t))
        elif kind == "video":
            t, h, w = _grid(seg, merge)
            spg = seg[2] if len(seg) > 2 else 1.0
            block = start + _vision(t, h, w, _time_index(t, spg, tokens_per_second))
        elif kind == "video_audio":
            t, h, w = _grid(seg, merge)
            spg, n_audio = seg[2], int(seg[3])
            video = start + _vision(t, h, w, _time_index(t, spg, position_id_per_seconds))
            audio = np.repeat((start + np.arange(n_audio))[:, None], 3, axis=1)
            if audio_in_video == "chunked":
                per_chunk = position_id_per_seconds * seconds_per_chunk
                vc = ((video[:, 0] - start) // per_chunk).astype(np.int64)
                ac = ((audio[:, 0] - start) // per_chunk).astype(np.int64)
                chunks = []
                for j in range(int(max(vc.max(initial=-1), ac.max(initial=-1))) + 1):
                    chunks += [video[vc == j], audio[ac == j]]
                block = np.concatenate(chunks) if chunks else np.zeros((0, 3), np.int64)
            else:
                both = np.concatenate([video, audio])
                order = np.argsort(both[:, 0], kind="stable")  # video before audio at ties
                block = both[order]
        else:
            raise ValueError(f"unknown segment kind {kind!r}; expected text, audio, image, "
                             "video or video_audio")
        if len(block):
            parts.append(block.astype(np.int64))
            start = int(block.max()) + 1
    pos = np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)
    return pos, (int(pos.max()) + 1 - len(pos)) if len(pos) else 0


def split_video_frames(segments: Sequence[tuple[Any, ...]], timestamp_tokens: int | Sequence[int]
                       ) -> list[tuple[Any, ...]]:
    """Qwen3-VL's video layout: each ``("video", (t, h, w), s)`` becomes t frames of grid
    ``(1, h, w)``, each preceded by its timestamp text (``timestamp_tokens`` tokens, one count
    for all frames or one per frame), so the temporal position is carried by the text counter.
    (With a temporal patch of 2, HF's ``t`` already counts frame pairs.)"""
    out: list[tuple[Any, ...]] = []
    for seg in segments:
        if seg[0] != "video":
            out.append(seg)
            continue
        t, h, w = (int(v) for v in seg[1])
        counts = ([int(timestamp_tokens)] * t if np.ndim(timestamp_tokens) == 0
                  else [int(c) for c in timestamp_tokens])
        if len(counts) != t:
            raise ValueError(f"timestamp_tokens has {len(counts)} counts for a video of {t} frames")
        for c in counts:
            out += [("text", c), ("video", (1, h, w), 1.0)]
    return out


def mrope_positions_from_tokens(input_ids: Sequence[int], *, image_token_id: int,
                                video_token_id: int, image_grid_thw=None, video_grid_thw=None,
                                seconds_per_grid=None, spatial_merge_size: int = 2,
                                tokens_per_second: float | None = None
                                ) -> tuple[np.ndarray, int]:
    """:func:`mrope_positions` of a token sequence whose image / video placeholder tokens
    stand for the grids ``image_grid_thw`` / ``video_grid_thw`` (``[n, 3]``, in order; each grid
    takes ``t h w / m^2`` consecutive placeholders); every other token is text. ``seconds_per_grid``
    (one per video; default 1.0) as HF's ``second_per_grid_ts``."""
    ids = np.asarray(input_ids).ravel()
    grids = {image_token_id: [tuple(g) for g in (image_grid_thw if image_grid_thw is not None
                                                   else [])],
             video_token_id: [tuple(g) for g in (video_grid_thw if video_grid_thw is not None
                                                   else [])]}
    spg = list(seconds_per_grid) if seconds_per_grid is not None else [1.0] * len(
        grids[video_token_id])
    used = {image_token_id: 0, video_token_id: 0}
    m2 = int(spatial_merge_size) ** 2
    segments: list[tuple[Any, ...]] = []
    i, text = 0, 0
    while i < len(ids):
        tok = int(ids[i])
        if tok not in used:
            text, i = text + 1, i + 1
            continue
        if text:
            segments.append(("text", text))
            text = 0
        k = used[tok]
        name = "image" if tok == image_token_id else "video"
        if k >= len(grids[tok]):
            raise ValueError(f"input_ids has more {name} placeholder runs than {name}_grid_thw "
                             f"rows ({len(grids[tok])})")
        g = grids[tok][k]
        n = int(np.prod(g)) // m2
        if not np.all(ids[i:i + n] == tok) or i + n > len(ids):
            raise ValueError(f"{name} {k} with grid {g} needs {n} consecutive placeholder tokens "
                             f"at index {i}")
        segments.append(("image", g) if name == "image" else ("video", g, spg[k]))
        used[tok] += 1
        i += n
    if text:
        segments.append(("text", text))
    for tok, name in ((image_token_id, "image"), (video_token_id, "video")):
        if used[tok] != len(grids[tok]):
            raise ValueError(f"{name}_grid_thw has {len(grids[tok])} rows but input_ids holds "
                             f"{used[tok]} {name} runs")
    return mrope_positions(segments, spatial_merge_size=spatial_merge_size,
                           tokens_per_second=tokens_per_second)
