"""Interleaved M-RoPE (Qwen3-VL), M-RoPE + YaRN, and the M-RoPE position layouts of multimodal
prompts against an independent NumPy transcription of Hugging Face's position-index function
(``get_rope_index`` of ``Qwen2_5_VLModel`` in ``modeling_qwen2_5_vl.py``, and of
``Qwen3VLModel`` in ``modeling_qwen3_vl.py``)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.encodings as pe
from posjax.encodings.mrope import apply_mrope, mrope_components, mrope_sections
from posjax.encodings.mrope_layout import (mrope_positions, mrope_positions_from_tokens,
                                           split_video_frames)


def _qk(shape=(2, 9, 2, 32), seed=0):
    kq, kk = jax.random.split(jax.random.key(seed))
    return jax.random.normal(kq, shape), jax.random.normal(kk, shape)


def test_interleaved_equals_block_equals_rope_on_text_tokens():
    q, k = _qk()
    pos = jnp.arange(9)[None] * 5 + 2
    pos3 = jnp.stack([pos] * 3, -1)
    rope = pe.make("rope", head_dim=32)
    want = rope.rotate(q, k, pos, pos)
    worst = 0.0
    for layout in ("block", "interleaved"):
        m = pe.make("mrope", head_dim=32, section_layout=layout)
        for p in (pos, pos3):
            for a, b in zip(m.rotate(q, k, p, p), want):
                worst = max(worst, float(jnp.abs(a - b).max()))
    assert worst < 1e-5, worst
    # and with YaRN: mrope_yarn (both layouts) = rope_yarn on text
    opts = dict(factor=4.0, original_max_len=64)
    want = pe.make("rope_yarn", head_dim=32, **opts).rotate(q, k, pos, pos)
    for layout in ("block", "interleaved"):
        m = pe.make("mrope_yarn", head_dim=32, section_layout=layout, **opts)
        for a, b in zip(m.rotate(q, k, pos3, pos3), want):
            worst = max(worst, float(jnp.abs(a - b).max()))
    assert worst < 1e-5, worst


def test_mrope_yarn_has_yarns_frequencies_and_attention_factor():
    opts = dict(factor=8.0, original_max_len=128, beta=16.0, alpha=2.0)
    a = pe.make("mrope_yarn", head_dim=64, **opts)
    b = pe.make("rope_yarn", head_dim=64, **opts)
    np.testing.assert_array_equal(np.asarray(a.frequencies(), np.float32),
                                  np.asarray(b.frequencies(), np.float32))
    assert a.magnitude() == b.magnitude() == pytest.approx(0.1 * np.log(8.0) + 1)


def _hf_interleave(freqs, sections):
    """HF apply_interleaved_mrope: start from the t frequencies, overwrite every third pair
    from offset 1 (h) and 2 (w) up to 3 * section."""
    out = freqs[0].copy()
    for dim, offset in ((1, 1), (2, 2)):
        out[..., offset:3 * sections[dim]:3] = freqs[dim][..., offset:3 * sections[dim]:3]
    return out


def test_interleaved_layout_matches_hf_and_a_float64_rotation():
    assert mrope_sections(64, layout="interleaved") == (24, 20, 20)
    comp = mrope_components(64, (24, 20, 20), "interleaved")
    assert list(comp[:7]) == [0, 1, 2, 0, 1, 2, 0] and list(comp[-4:]) == [0, 0, 0, 0]
    assert np.bincount(comp).tolist() == [24, 20, 20]
    with pytest.raises(ValueError, match="must fit"):
        mrope_sections(8, (0, 4, 4), "interleaved")
    with jax.enable_x64(True):
        P = 8
        theta = 10000.0 ** (-np.arange(P) * 2.0 / (2 * P))
        pos = np.array([[[0, 1, 2], [4, 0, 7], [9, 5, 3]]], np.float64)  # (t, h, w)
        x = np.asarray(jax.random.normal(jax.random.key(2), (1, 3, 1, 2 * P), jnp.float64))
        sec = (4, 2, 2)
        got = np.asarray(apply_mrope(jnp.asarray(x), jnp.asarray(pos), theta=jnp.asarray(theta),
                                     sections=sec, layout="interleaved"))
        freqs = np.stack([pos[0, :, c][:, None] * theta for c in range(3)])  # [3, T, P]
        ang = _hf_interleave(freqs, sec)
        a, b = x[0, :, 0, :P], x[0, :, 0, P:]
        want = np.concatenate([a * np.cos(ang) - b * np.sin(ang),
                               a * np.sin(ang) + b * np.cos(ang)], -1)
        np.testing.assert_allclose(got[0, :, 0], want, atol=1e-12)


# --- position layouts ------------------------------------------------------------------------
VS, VE, IMG, VID = 1, 2, 3, 4   # vision_start, vision_end, image and video placeholder ids


def hf_get_rope_index(input_ids, image_grid_thw, video_grid_thw, second_per_grid_ts, *,
                      merge, tokens_per_second, qwen3=False):
    """NumPy transcription (semantics, one unpadded row) of get_rope_index in
    modeling_qwen2_5_vl.py (Qwen2_5_VLModel), or of modeling_qwen3_vl.py (Qwen3VLModel) with
    ``qwen3``: Qwen3-VL first repeats each video grid row t times with t set to 1 (one grid per
    frame) and has no time scaling. Returns ([3, T], delta)."""
    if qwen3 and video_grid_thw is not None:
        video_grid_thw = [(1, h, w) for (t, h, w) in video_grid_thw for _ in range(t)]
    tokens = list(input_ids)
    kinds = [tokens[i + 1] for i, tok in enumerate(tokens) if tok == VS]
    n_img, n_vid = kinds.count(IMG), kinds.count(VID)
    pieces, st, ii, vi = [], 0, 0, 0
    rem_i, rem_v = n_img, n_vid
    for _ in range(n_img + n_vid):
        ed_i = tokens.index(IMG, st) if IMG in tokens[st:] and rem_i > 0 else len(tokens) + 1
        ed_v = tokens.index(VID, st) if VID in tokens[st:] and rem_v > 0 else len(tokens) + 1
        if ed_i < ed_v:
            t, h, w = image_grid_thw[ii]
            spg, ii, rem_i, ed = 0.0, ii + 1, rem_i - 1, ed_i
        else:
            t, h, w = video_grid_thw[vi]
            spg = second_per_grid_ts[vi] if second_per_grid_ts is not None else 1.0
            vi, rem_v, ed = vi + 1, rem_v - 1, ed_v
        gt, gh, gw = t, h // merge, w // merge
        text_len = ed - st
        st_idx = pieces[-1].max() + 1 if pieces else 0
        pieces.append(np.tile(np.arange(text_len), (3, 1)) + st_idx)
        frames = np.repeat(np.arange(gt), gh * gw)
        if qwen3:
            t_index = frames
        else:
            t_index = (frames * spg * tokens_per_second).astype(np.int64)
        h_index = np.tile(np.repeat(np.arange(gh), gw), gt)
        w_index = np.tile(np.arange(gw), gt * gh)
        pieces.append(np.stack([t_index, h_index, w_index]) + text_len + st_idx)
        st = ed + gt * gh * gw
    if st < len(tokens):
        st_idx = pieces[-1].max() + 1 if pieces else 0
        pieces.append(np.tile(np.arange(len(tokens) - st), (3, 1)) + st_idx)
    pos = np.concatenate(pieces, axis=1)
    return pos, int(pos.max()) + 1 - len(tokens)


def _text(n, start=10):
    return list(range(start, start + n))


def _prompt_qwen25():
    """text + image (1, 4, 6) + text + video (3, 4, 4) at 2 s per grid + text + image (1, 2, 2)
    + text + video (2, 2, 4) at 1 s + text."""
    image1, video1, image2, video2 = (1, 4, 6), (3, 4, 4), (1, 2, 2), (2, 2, 4)
    ids = (_text(5) + [VS] + [IMG] * 6 + [VE] + _text(3) + [VS] + [VID] * 12 + [VE] + _text(4)
           + [VS] + [IMG] * 1 + [VE] + _text(2) + [VS] + [VID] * 4 + [VE] + _text(3))
    return ids, [image1, image2], [video1, video2], [2.0, 1.0]


def test_layouts_equal_hf_get_rope_index_qwen2_5_vl():
    ids, images, videos, spg = _prompt_qwen25()
    for tps in (2, None):  # Qwen2.5-VL time alignment; None: Qwen2-VL's frame index (HF's
        # Qwen2-VL t_index is the frame, i.e. the Qwen2.5-VL form at 1 s per grid, 1 per second)
        want, want_delta = hf_get_rope_index(ids, images, videos,
                                             spg if tps else [1.0, 1.0], merge=2,
                                             tokens_per_second=tps or 1)
        got, delta = mrope_positions_from_tokens(
            ids, image_token_id=IMG, video_token_id=VID, image_grid_thw=images,
            video_grid_thw=videos, seconds_per_grid=spg, tokens_per_second=tps)
        np.testing.assert_array_equal(got.T, want)
        assert delta == want_delta
    # the time alignment is visible: video 1 frames at t offsets 0, 4, 8 (2 s x 2 per s)
    got, _ = mrope_positions_from_tokens(ids, image_token_id=IMG, video_token_id=VID,
                                         image_grid_thw=images, video_grid_thw=videos,
                                         seconds_per_grid=spg, tokens_per_second=2)
    v = got[ids.index(VID):ids.index(VID) + 12]
    assert sorted(set((v[:, 0] - v[0, 0]).tolist())) == [0, 4, 8]


def test_layouts_equal_hf_get_rope_index_qwen3_vl():
    # Qwen3-VL: each frame is preceded by its timestamp text (3 tokens) and wrapped in VS/VE
    ts = 3
    ids = _text(4) + [VS] + [IMG] * 4 + [VE] + _text(2)
    for f in range(3):
        ids += _text(ts, 50 + 3 * f) + [VS] + [VID] * 4 + [VE]
    ids += _text(5)
    want, want_delta = hf_get_rope_index(ids, [(1, 4, 4)], [(3, 4, 4)], None, merge=2,
                                         tokens_per_second=None, qwen3=True)
    # posjax: split the video into frames with their timestamp text (VE of the previous frame,
    # the timestamp, VS) as the text before each frame
    segments = [("text", 5), ("image", (1, 4, 4)), ("text", 1 + 2), ("video", (3, 4, 4), 1.0),
                ("text", 1 + 5)]
    frames = split_video_frames(segments, timestamp_tokens=[ts + 1, ts + 2, ts + 2])
    got, delta = mrope_positions(frames)
    np.testing.assert_array_equal(got.T, want)
    assert delta == want_delta


def test_text_only_layout_is_arange_and_audio_layouts():
    pos, delta = mrope_positions([("text", 4), ("audio", 3), ("text", 2)])
    np.testing.assert_array_equal(pos, np.repeat(np.arange(9)[:, None], 3, 1))
    assert delta == 0
    # audio inside a video, Qwen2.5-Omni: 25 position units per second, 2 s chunks (50 units);
    # video (4, 2, 2) at 1 s per grid: frames at t = 0, 25, 50, 75 (one token each); audio of
    # 120 tokens at 0..119: chunks [0, 50), [50, 100), [100, 150)
    pos, _ = mrope_positions([("text", 2), ("video_audio", (4, 2, 2), 1.0, 120)],
                             audio_in_video="chunked")
    body = pos[2:] - 2
    want_t = [0, 25] + list(range(50)) + [50, 75] + list(range(50, 100)) + list(range(100, 120))
    np.testing.assert_array_equal(body[:, 0], want_t)
    video_rows = np.isin(np.arange(len(body)), [0, 1, 52, 53])
    np.testing.assert_array_equal(body[video_rows, 1:], 0)  # (h, w) of a 1 x 1 merged grid
    np.testing.assert_array_equal(body[~video_rows, 1], body[~video_rows, 0])  # audio: t=h=w
    merged, _ = mrope_positions([("text", 2), ("video_audio", (4, 2, 2), 1.0, 120)],
                                audio_in_video="merged")
    assert np.all(np.diff(merged[2:, 0]) >= 0) and len(merged) == len(pos)


def test_layout_errors_name_the_input():
    with pytest.raises(ValueError, match="divisible by spatial_merge_size"):
        mrope_positions([("image", (1, 3, 4))])
    with pytest.raises(ValueError, match="unknown segment kind"):
        mrope_positions([("mesh", 3)])
    with pytest.raises(ValueError, match="image_grid_thw has 2 rows"):
        mrope_positions_from_tokens([10, IMG, IMG, IMG, IMG, 11], image_token_id=IMG,
                                    video_token_id=VID, image_grid_thw=[(1, 4, 4), (1, 4, 4)])
