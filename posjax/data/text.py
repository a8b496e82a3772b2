"""Text-classification data (SST-2, IMDB) and WordPiece tokenisation.

Loading goes through the Hugging Face ``datasets`` library in both of its ways:

* **local files** (``data_dir=`` or the ``POSJAX_DATA_DIR`` environment variable): one file per
  split named ``<split>.parquet``, ``<split>.csv`` or ``<split>.jsonl`` with a ``text`` and a
  ``label`` column (SST-2 also accepts ``sentence``);
* **the hub** (GLUE ``sst2`` / ``stanfordnlp/sst2``; ``stanfordnlp/imdb``) when no local
  directory is given. Reachability is probed first with a short timeout (in a thread, so a
  hanging DNS lookup cannot block), and nothing is asked of the hub when it is unreachable.

When neither way works the error names both. Tokenisation uses the ``tokenizers`` library: a
WordPiece vocabulary trained on the training split (cached on disk) or a local
``bert-base-uncased`` ``vocab.txt``; BERT inputs are ``[CLS] text [SEP]`` truncated/padded to
``max_len``.

References: SST-2 (Socher et al., 2013; GLUE, arXiv 1804.07461); IMDB (Maas et al., 2011);
WordPiece/BERT (arXiv 1810.04805). Used by the stress experiment of arXiv 2604.05217.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import urllib.request
from typing import Any, Sequence

import numpy as np

__all__ = ["DATASETS", "TextData", "Encoded", "TextTokenizer", "load_text_classification",
           "find_split_file", "hub_reachable", "wordpiece_tokenizer", "vocab_tokenizer"]

ENV_DATA_DIR = "POSJAX_DATA_DIR"
EXTENSIONS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "json"}
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset lives and what it looks like.

    Attributes:
      hub: ``(path, config)`` candidates tried in order on the hub.
      splits: canonical split name -> accepted aliases (also tried as local file names).
      text_columns: accepted text columns, in order of preference.
      num_classes: labels must lie in ``[0, num_classes)``.
      max_len: default sequence length (SST-2 64, IMDB 512).
    """

    hub: tuple[tuple[str, str | None], ...]
    splits: dict[str, tuple[str, ...]]
    text_columns: tuple[str, ...]
    num_classes: int
    max_len: int


DATASETS: dict[str, DatasetSpec] = {
    "sst2": DatasetSpec(hub=(("nyu-mll/glue", "sst2"), ("stanfordnlp/sst2", None)),
                        splits={"train": (), "validation": ("dev", "val"), "test": ()},
                        text_columns=("text", "sentence"), num_classes=2, max_len=64),
    "imdb": DatasetSpec(hub=(("stanfordnlp/imdb", None),),
                        splits={"train": (), "test": ()},
                        text_columns=("text",), num_classes=2, max_len=512),
}


@dataclasses.dataclass(frozen=True)
class TextData:
    """One labelled split: ``texts [M]`` (str objects), ``labels [M]`` int64, and provenance."""

    texts: np.ndarray
    labels: np.ndarray
    source: str
    name: str
    split: str
    num_classes: int

    def __len__(self) -> int:
        return len(self.labels)


def _spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ValueError(f"unknown text dataset {name!r}; known: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]


def _canonical_split(name: str, split: str) -> str:
    spec = _spec(name)
    for canon, aliases in spec.splits.items():
        if split == canon or split in aliases:
            return canon
    raise ValueError(f"unknown split {split!r} of {name}; known: {', '.join(spec.splits)}")


def find_split_file(data_dir: str, name: str, split: str, *, source: str = "data_dir") -> str:
    """The local file of ``split`` in ``data_dir`` (``<split>.parquet|csv|jsonl``); ``source``
    names where ``data_dir`` came from, for the error messages.

    Raises:
      FileNotFoundError: the directory or the file is missing (the message lists what was tried).
      ValueError: more than one candidate file exists for the split.
    """
    canon = _canonical_split(name, split)
    stems = (canon,) + _spec(name).splits[canon]
    if not os.path.isdir(data_dir):
        expected = ", ".join(f"{s}.parquet|csv|jsonl" for s in stems)
        raise FileNotFoundError(f"data directory {data_dir!r} (from {source}) does not exist; "
                                f"for the {name} split {canon!r} it should hold one of: "
                                f"{expected}")
    found = [os.path.join(data_dir, s + ext) for s in stems for ext in EXTENSIONS
             if os.path.isfile(os.path.join(data_dir, s + ext))]
    if not found:
        tried = ", ".join(f"{s}{ext}" for s in stems for ext in EXTENSIONS)
        raise FileNotFoundError(f"no file for the {name} split {canon!r} in {data_dir} "
                                f"(looked for {tried})")
    if len(found) > 1:
        raise ValueError(f"several files for the {name} split {canon!r}: {', '.join(found)}; "
                         "keep one")
    return found[0]


def _quiet_datasets():
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


def _columns(table: Any, where: str, name: str) -> TextData:
    """Validate and convert a ``datasets.Dataset`` with text/label columns."""
    spec = _spec(name)
    cols = list(table.column_names)
    text_col = next((c for c in spec.text_columns if c in cols), None)
    if text_col is None:
        raise ValueError(f"{where} has no text column (expected "
                         f"{' or '.join(repr(c) for c in spec.text_columns)}; found {cols})")
    if "label" not in cols:
        raise ValueError(f"{where} has no 'label' column (found {cols})")
    if table.num_rows == 0:
        raise ValueError(f"{where} is empty (0 rows)")
    texts = table[text_col]
    missing = sum(t is None for t in texts)
    if missing:
        raise ValueError(f"column {text_col!r} of {where} has {missing} missing values")
    raw = np.asarray(table["label"], dtype=object)
    try:
        labels = raw.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"column 'label' of {where} must hold integer class ids; found values "
                         f"like {raw[:3].tolist()}") from None
    if np.isnan(labels).any() or (labels != np.round(labels)).any():
        raise ValueError(f"column 'label' of {where} must hold integer class ids (found "
                         "missing or fractional values)")
    labels = labels.astype(np.int64)
    bad = (labels < 0) | (labels >= spec.num_classes)
    if bad.any():
        raise ValueError(f"column 'label' of {where} has {int(bad.sum())} labels outside "
                         f"[0, {spec.num_classes}) (e.g. {sorted(set(labels[bad].tolist()))[:5]}); "
                         "unlabelled splits (GLUE test, IMDB unsupervised) cannot be used")
    arr = np.empty(len(texts), dtype=object)
    arr[:] = [str(t) for t in texts]
    return TextData(arr, labels, "", name, "", spec.num_classes)


def _has_rows(path: str) -> bool:
    """Cheap emptiness check before ``datasets`` (which fails obscurely on empty files)."""
    ext = os.path.splitext(path)[1]
    if ext == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(path).metadata.num_rows > 0
        except Exception:  # noqa: BLE001 (unreadable: let datasets report it)
            return True
    needed = 2 if ext == ".csv" else 1  # a CSV needs a header and one row
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            needed -= bool(line.strip())
            if needed == 0:
                return True
    return False


def _load_local(path: str, name: str, split: str, cache_dir: str | None) -> TextData:
    if not _has_rows(path):
        raise ValueError(f"{path} is empty (0 rows)")
    datasets = _quiet_datasets()
    builder = EXTENSIONS[os.path.splitext(path)[1]]
    try:
        table = datasets.load_dataset(builder, data_files={"data": path}, split="data",
                                      cache_dir=cache_dir)
    except Exception as e:  # datasets raises many types for unreadable files
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"could not read {path} ({type(e).__name__}: {first})") from None
    data = _columns(table, path, name)
    return dataclasses.replace(data, source=f"local:{os.path.abspath(path)}", split=split)


def hub_reachable(timeout: float = 5.0) -> tuple[bool, str]:
    """Probe the Hugging Face hub (``HF_ENDPOINT`` or huggingface.co) within ``timeout`` s.

    The request runs in a daemon thread, so a DNS lookup that hangs cannot block the caller;
    proxies from the environment are honoured (urllib). Returns ``(ok, reason)``.
    """
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or \
            os.environ.get("HF_DATASETS_OFFLINE", "0") not in ("", "0"):
        return False, "offline mode is set (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)"
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/") + "/api/status"
    result: list[str] = []

    def probe():
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
            result.append("")
        except urllib.error.HTTPError:
            result.append("")  # the server answered: the hub is reachable
        except Exception as e:  # noqa: BLE001 (any failure means unreachable)
            result.append(f"{type(e).__name__}: {getattr(e, 'reason', e)}")

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    if not result:
        return False, f"no answer from {url} within {timeout:g} s"
    return (True, "") if result[0] == "" else (False, f"{url} unreachable ({result[0]})")


def _load_hub(name: str, split: str, cache_dir: str | None, timeout: float
              ) -> tuple[TextData | None, str]:
    ok, reason = hub_reachable(timeout)
    if not ok:
        return None, reason
    datasets = _quiet_datasets()
    errors = []
    for path, config in _spec(name).hub:
        try:
            table = datasets.load_dataset(path, config, split=split, cache_dir=cache_dir)
        except Exception as e:  # noqa: BLE001 (try the next candidate, report all)
            errors.append(f"{path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        where = f"hub {path}{'/' + config if config else ''} [{split}]"
        data = _columns(table, where, name)
        return dataclasses.replace(data, source=f"hub:{path}{'/' + config if config else ''}",
                                   split=split), ""
    return None, "; ".join(errors)


def load_text_classification(name: str, split: str, *, data_dir: str | None = None,
                             hub: bool = True, hub_timeout: float = 5.0,
                             cache_dir: str | None = None) -> TextData:
    """Load one split of SST-2 or IMDB as ``TextData(texts, labels, source, ...)``.

    Args:
      name: ``"sst2"`` or ``"imdb"``.
      split: ``"train"``, ``"validation"`` (SST-2; aliases ``dev``/``val``) or ``"test"``
        (IMDB; the GLUE SST-2 test split is unlabelled and is rejected).
      data_dir: directory with ``<split>.parquet|csv|jsonl`` files (``text``/``label`` columns;
        ``sentence`` accepted for SST-2). Defaults to ``$POSJAX_DATA_DIR``. When a directory is
        given the hub is not used.
      hub: allow the hub when no directory is given.
      hub_timeout: seconds allowed for the reachability probe.
      cache_dir: ``datasets`` cache directory (None: its default).

    Returns:
      :class:`TextData` with ``texts [M]`` (object array of str), ``labels [M]`` int64 in
      ``[0, num_classes)`` and ``source`` (``"local:<path>"`` or ``"hub:<repo>"``).

    Raises:
      ValueError: unknown dataset or split; a file without the expected columns, with labels
        outside the class range, or with no rows (the message names the file and column).
      FileNotFoundError: the split file is missing, or no directory was given and the hub is
        unreachable (the message names both ways to supply the data).
    """
    canon = _canonical_split(name, split)
    source = "data_dir (--data-dir)" if data_dir else f"${ENV_DATA_DIR}"
    data_dir = data_dir or os.environ.get(ENV_DATA_DIR) or None
    if data_dir is not None:
        return _load_local(find_split_file(data_dir, name, canon, source=source), name, canon,
                           cache_dir)
    reason = "the hub is disabled (hub=False)"
    if hub:
        data, reason = _load_hub(name, canon, cache_dir, hub_timeout)
        if data is not None:
            return data
    stem = canon
    raise FileNotFoundError(
        f"cannot load {name} [{canon}]: {reason}. Supply the data either from the Hugging Face "
        f"hub (network access; {', '.join(p for p, _ in _spec(name).hub)}) or from local files: "
        f"--data-dir DIR or {ENV_DATA_DIR}=DIR with {stem}.parquet, {stem}.csv or {stem}.jsonl "
        f"holding columns {' or '.join(_spec(name).text_columns)} and label")


# --- tokenisation ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Encoded:
    """Token ids ``[M, max_len]`` int32, ``padding_mask [M, max_len]`` (True on real tokens)
    and ``lengths [M]`` (number of real tokens, specials included)."""

    tokens: np.ndarray
    padding_mask: np.ndarray
    lengths: np.ndarray


@dataclasses.dataclass(frozen=True)
class TextTokenizer:
    """A ``tokenizers.Tokenizer`` with BERT-style specials and where it came from."""

    tokenizer: Any
    source: str

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    def token_id(self, token: str) -> int:
        i = self.tokenizer.token_to_id(token)
        if i is None:
            raise ValueError(f"the vocabulary ({self.source}) has no {token} token")
        return int(i)

    @property
    def pad_id(self) -> int:
        return self.token_id("[PAD]")

    @property
    def special_ids(self) -> tuple[int, int]:
        """``([CLS], [SEP])`` ids."""
        return self.token_id("[CLS]"), self.token_id("[SEP]")

    def encode(self, texts: Sequence[str], max_len: int, *, keep_special: bool = True) -> Encoded:
        """Tokenise, truncate and pad to ``max_len``.

        ``keep_special=True`` gives BERT inputs ``[CLS] w_0 ... [SEP]`` (truncation keeps the
        final ``[SEP]``); ``False`` gives the content tokens only, re-indexed from position 0
        (docs/interpretations.md, option ``keep_special``).
        """
        if max_len < (3 if keep_special else 1):
            raise ValueError(f"max_len={max_len} is too short")
        tok = self.tokenizer
        tok.enable_truncation(max_len)
        tok.enable_padding(length=max_len, pad_id=self.pad_id, pad_token="[PAD]")
        try:
            out = tok.encode_batch([str(t) for t in texts], add_special_tokens=keep_special)
        finally:
            tok.no_truncation()
            tok.no_padding()
        ids = np.asarray([e.ids for e in out], np.int32).reshape(len(out), max_len)
        mask = np.asarray([e.attention_mask for e in out], bool).reshape(len(out), max_len)
        return Encoded(ids, mask, mask.sum(1).astype(np.int32))


def _bert_pipeline(tok: Any, lowercase: bool) -> None:
    from tokenizers import decoders, normalizers, pre_tokenizers

    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()


def _add_template(tok: Any) -> None:
    from tokenizers import processors

    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])


def wordpiece_tokenizer(texts: Sequence[str], *, vocab_size: int = 8000, min_frequency: int = 2,
                        lowercase: bool = True, cache_path: str | None = None) -> TextTokenizer:
    """Train (or load from ``cache_path``) a BERT-style WordPiece tokenizer on ``texts``.

    Specials get the ids ``[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4``. The vocabulary is
    trained by :func:`posjax.data.wordpiece.train_wordpiece_vocab` (the algorithm of
    ``tokenizers``' WordPiece trainer with its ties broken in a fixed order, so the same texts
    give the same ids in every run; that trainer's own result changes from run to run). The
    trained tokenizer is saved to ``cache_path`` (JSON) and reloaded from it on later calls; the
    caller keys the path on the training data and ``vocab_size``.
    """
    from tokenizers import Tokenizer, models

    from posjax.data.wordpiece import train_wordpiece_vocab, word_counts

    if cache_path is not None and os.path.exists(cache_path):
        return TextTokenizer(Tokenizer.from_file(cache_path), f"wordpiece:{cache_path}")
    if len(texts) == 0:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
    probe = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    _bert_pipeline(probe, lowercase)
    counts = word_counts(texts, probe.normalizer, probe.pre_tokenizer)
    if not counts:
        raise ValueError("cannot train a tokenizer on a corpus with no words")
    vocab = train_wordpiece_vocab(counts, vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  min_frequency=min_frequency)
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    _bert_pipeline(tok, lowercase)
    _add_template(tok)
    source = f"wordpiece(trained, vocab_size={vocab_size})"
    if cache_path is not None:
        os.makedirs(os.path.dirname(os.path.abspath(cache_path)), exist_ok=True)
        tmp = cache_path + ".tmp"
        tok.save(tmp)
        os.replace(tmp, cache_path)
        source += f":{cache_path}"
    return TextTokenizer(tok, source)


def vocab_tokenizer(vocab_file: str, *, lowercase: bool = True) -> TextTokenizer:
    """A tokenizer from a local BERT ``vocab.txt`` (e.g. bert-base-uncased, 30,522 entries)."""
    from tokenizers import Tokenizer, models

    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"vocab file {vocab_file!r} does not exist")
    with open(vocab_file, encoding="utf-8") as f:
        vocab = {line.rstrip("\n"): i for i, line in enumerate(f) if line.rstrip("\n")}
    missing = [t for t in SPECIAL_TOKENS[:4] if t not in vocab]
    if missing:
        raise ValueError(f"vocab file {vocab_file} lacks the special tokens {missing}")
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    _bert_pipeline(tok, lowercase)
    _add_template(tok)
    return TextTokenizer(tok, f"vocab:{os.path.abspath(vocab_file)}")
