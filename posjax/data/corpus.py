"""Your own corpus: plain-text or tabular files, any tokenizer, labels optional.

:func:`load_corpus` reads a directory (or one file) of

* ``.txt``: one sequence per line (blank lines skipped), no labels;
* ``.jsonl`` / ``.parquet`` / ``.csv``: a text column (``text``, ``sentence``, ``sequence``,
  ``content`` or ``code``, or the one named by ``text_column``) and optionally a ``label`` column.

Files named ``train.*``, ``validation.*`` (``dev``, ``val``) or ``test.*`` are those splits;
any other file belongs to ``train``. :func:`load_tokenizer` takes a ``tokenizer.json`` (any
``tokenizers`` model: BPE for code, character-level for proteins, ...), a WordPiece ``vocab.txt``
or a checkpoint directory holding one of them. :func:`corpus_tokens` then gives the ``[M, n]``
token matrix and lengths that ``posjax.geometry.positional_distributions`` takes.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from posjax.data.text import TextTokenizer, vocab_tokenizer

TEXT_COLUMNS = ("text", "sentence", "sequence", "content", "code")
SPLITS = {"train": "train", "validation": "validation", "dev": "validation", "val": "validation",
          "test": "test"}
FORMATS = (".txt", ".jsonl", ".parquet", ".csv")


@dataclasses.dataclass(frozen=True)
class CorpusSplit:
    """Texts ``[M]`` (str objects), labels ``[M]`` int64 or None, and the files read."""

    texts: np.ndarray
    labels: np.ndarray | None
    files: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.texts)


def _read_table(path: Path, text_column: str | None, label_column: str):
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip()]
        columns = {k: [r.get(k) for r in rows] for k in (rows[0] if rows else {})}
    else:
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq
        table = pq.read_table(path) if path.suffix == ".parquet" else pcsv.read_csv(path)
        columns = table.to_pydict()
    names = [text_column] if text_column else [c for c in TEXT_COLUMNS if c in columns]
    if not names or names[0] not in columns:
        raise ValueError(f"{path} has no text column (looked for "
                         f"{text_column or ', '.join(TEXT_COLUMNS)}; found {', '.join(columns)})")
    texts = [str(t) for t in columns[names[0]]]
    labels = columns.get(label_column)
    if labels is not None:
        if any(v is None for v in labels):
            raise ValueError(f"{path}: column {label_column!r} has missing values")
        labels = np.asarray(labels)
        if not np.issubdtype(labels.dtype, np.integer):
            _, labels = np.unique(labels.astype(str), return_inverse=True)  # class names -> ids
    return texts, labels


def load_corpus(path: str | os.PathLike, *, text_column: str | None = None,
                label_column: str = "label") -> dict[str, CorpusSplit]:
    """Read a corpus directory (or file) into splits ``{"train": ..., ["validation"], ["test"]}``.

    Raises:
      ValueError: no readable file, an empty corpus, no text column, or labels present in some
        files of a split and not in others.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ValueError(f"corpus path {path} does not exist")
    files = [path] if path.is_file() else sorted(
        p for p in path.iterdir() if p.is_file() and p.suffix in FORMATS)
    if not files:
        raise ValueError(f"{path} holds no {', '.join(FORMATS)} file")
    parts: dict[str, list] = {}
    for f in files:
        if f.suffix not in FORMATS:
            raise ValueError(f"unsupported corpus file {f} (use {', '.join(FORMATS)})")
        if f.suffix == ".txt":
            texts = [line for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
            labels = None
        else:
            texts, labels = _read_table(f, text_column, label_column)
        parts.setdefault(SPLITS.get(f.stem.lower(), "train"), []).append((f, texts, labels))
    out = {}
    for split, items in parts.items():
        has = [lab is not None for _, _, lab in items]
        if any(has) and not all(has):
            raise ValueError(f"split {split}: labels in some files but not in others "
                             f"({', '.join(str(f) for f, _, _ in items)})")
        texts = np.asarray([t for _, ts, _ in items for t in ts], dtype=object)
        labels = (np.concatenate([np.asarray(lab, np.int64) for _, _, lab in items])
                  if all(has) else None)
        out[split] = CorpusSplit(texts, labels, tuple(str(f) for f, _, _ in items))
    if "train" not in out or not len(out["train"]):
        raise ValueError(f"{path}: no training text (files other than validation/test count as "
                         f"train)")
    return out


@dataclasses.dataclass(frozen=True)
class AnyTokenizer(TextTokenizer):
    """A :class:`TextTokenizer` whose padding and boundary tokens are named by the tokenizer
    itself (``[PAD]``/``<pad>``, ``[CLS]``/``<s>``, ``[SEP]``/``</s>``, ...)."""

    pad_token: str = "[PAD]"
    cls_token: str | None = "[CLS]"
    sep_token: str | None = "[SEP]"

    @property
    def pad_id(self) -> int:
        return self.token_id(self.pad_token)

    @property
    def special_ids(self) -> tuple[int, int]:
        if self.cls_token is None or self.sep_token is None:
            raise ValueError(f"the tokenizer ({self.source}) has no boundary tokens")
        return self.token_id(self.cls_token), self.token_id(self.sep_token)


def _first_present(tok, names: Sequence[str]) -> str | None:
    return next((n for n in names if tok.token_to_id(n) is not None), None)


def load_tokenizer(spec: str | os.PathLike, *, lowercase: bool = True) -> TextTokenizer:
    """A tokenizer from a ``tokenizer.json``, a WordPiece ``vocab.txt`` or a directory holding
    either (a checkpoint's own tokenizer; ``tokenizer.json`` preferred)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        for name in ("tokenizer.json", "vocab.txt"):
            if (path / name).is_file():
                return load_tokenizer(path / name, lowercase=lowercase)
        raise ValueError(f"{path} holds no tokenizer.json or vocab.txt")
    if not path.is_file():
        raise ValueError(f"tokenizer {path} does not exist")
    if path.suffix == ".txt":
        return vocab_tokenizer(str(path), lowercase=lowercase)
    if path.suffix != ".json":
        raise ValueError(f"tokenizer must be a tokenizer.json, a vocab.txt or a directory; "
                         f"got {path}")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    pad = _first_present(tok, ("[PAD]", "<pad>", "<|padding|>", "<|pad|>"))
    if pad is None:
        raise ValueError(f"{path} has no padding token ([PAD], <pad>, <|padding|>)")
    return AnyTokenizer(tok, f"tokenizer.json:{path.resolve()}", pad,
                        _first_present(tok, ("[CLS]", "<s>", "<bos>")),
                        _first_present(tok, ("[SEP]", "</s>", "<eos>")))


def corpus_tokens(texts: Sequence[str], tokenizer: TextTokenizer, num_positions: int, *,
                  keep_special: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens [M, num_positions] int32, lengths [M])`` of ``texts`` (padded with the
    tokenizer's pad id), ready for ``posjax.geometry.positional_distributions``."""
    enc = tokenizer.encode(list(texts), num_positions, keep_special=keep_special)
    return enc.tokens, enc.lengths
