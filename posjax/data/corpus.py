"""Your own corpus: plain-text or tabular files, any tokenizer, labels optional.

:func:`load_corpus` reads a directory (or one file) of

* ``.txt``: one sequence per line (blank lines skipped), no labels;
* ``.jsonl`` / ``.parquet`` / ``.csv``: a text column (``text``, ``sentence``, ``sequence``,
  ``content`` or ``code``, or the one named by ``text_column``) and optionally a ``label`` column.

Files named ``train.*``, ``validation.*`` (``valid``, ``dev``, ``val``) or ``test.*`` (the name
up to its first dot: ``test.en.txt`` is test) are those splits; any other file belongs to
``train``. Class-name labels get one mapping over all files of the corpus. :func:`load_tokenizer` takes a ``tokenizer.json`` (any
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
SPLITS = {"train": "train", "validation": "validation", "valid": "validation", "dev": "validation",
          "val": "validation", "test": "test"}
FORMATS = (".txt", ".jsonl", ".parquet", ".csv")


@dataclasses.dataclass(frozen=True)
class CorpusSplit:
    """Texts ``[M]`` (str objects), labels ``[M]`` int64 or None, and the files read.

    ``label_names`` is the class name of each label id when the files hold class names (one
    mapping, the sorted names of all files of the corpus), None for integer labels.
    """

    texts: np.ndarray
    labels: np.ndarray | None
    files: tuple[str, ...]
    label_names: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self.texts)


def split_of(path: Path) -> str:
    """The split a file belongs to, from its name up to the first dot (``test.en.txt``: test)."""
    return SPLITS.get(path.name.split(".")[0].lower(), "train")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text ({e.reason} at byte {e.start})"
                         ) from None


def _jsonl_rows(path: Path) -> list[tuple[int, dict]]:
    rows = []
    for number, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not a JSON line ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: a JSON line must be an object, got "
                             f"{type(row).__name__}")
        rows.append((number, row))
    return rows


def _read_table(path: Path, text_column: str | None, label_column: str | None):
    """``(texts, raw labels or None)`` of one table file; every row must have the text column
    and, when any row (or the caller) names one, the label column."""
    label = label_column or "label"
    if path.suffix == ".jsonl":
        rows = _jsonl_rows(path)
        found = {k for _, r in rows for k in r}
        names = [text_column] if text_column else [c for c in TEXT_COLUMNS if c in found]
        if not names or names[0] not in found:
            raise ValueError(f"{path} has no text column (looked for "
                             f"{text_column or ', '.join(TEXT_COLUMNS)}; found "
                             f"{', '.join(sorted(found))})")
        for column in (names[0], label) if label in found else (names[0],):
            for number, r in rows:
                if r.get(column) is None:
                    raise ValueError(f"{path}:{number}: column {column!r} is missing or null")
        texts = [r[names[0]] for _, r in rows]
        labels = [r[label] for _, r in rows] if label in found else None
        lines = [n for n, _ in rows]
    else:
        import pyarrow as pa
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq
        try:
            if path.suffix == ".parquet":
                table = pq.read_table(path)
            else:  # text columns stay strings ("1" is a text, not the integer 1)
                text_types = {c: pa.string() for c in (text_column, *TEXT_COLUMNS) if c}
                table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(
                    column_types=text_types))
        except (pa.ArrowInvalid, OSError) as e:
            raise ValueError(f"{path}: cannot read the {path.suffix[1:]} table ({e})") from None
        columns = table.to_pydict()
        names = [text_column] if text_column else [c for c in TEXT_COLUMNS if c in columns]
        if not names or names[0] not in columns:
            raise ValueError(f"{path} has no text column (looked for "
                             f"{text_column or ', '.join(TEXT_COLUMNS)}; found "
                             f"{', '.join(columns)})")
        texts, labels = columns[names[0]], columns.get(label)
        lines = list(range(2 if path.suffix == ".csv" else 1, len(texts) + 2))  # csv: header
        for column, values in ((names[0], texts), (label, labels or [])):
            bad = next((i for i, v in enumerate(values) if v is None), None)
            if bad is not None:
                raise ValueError(f"{path}:{lines[bad]}: column {column!r} is missing or null")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise ValueError(f"{path}:{lines[bad]}: text column {names[0]!r} holds "
                         f"{type(texts[bad]).__name__} {texts[bad]!r}, not a string")
    if label_column is not None and labels is None:
        raise ValueError(f"{path} has no label column {label_column!r}")
    return texts, labels


def _label_kind(values) -> str:
    """"int" (every label an integer; bools are not) or "name" (strings, floats, ...)."""
    ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
               for v in values)
    return "int" if ints else "name"


def _label_ids(items) -> tuple[dict, tuple[str, ...] | None]:
    """One label mapping over every labelled file: ``({file: int64 ids}, names or None)``.

    Integer labels are kept; class names (any other values, compared as ``str``) are numbered
    by their sorted order over all files together, so one name has one id in every split.
    """
    labelled = [(f, lab) for f, _, lab in items if lab is not None]
    kinds = {f: _label_kind(lab) for f, lab in labelled}
    if len(set(kinds.values())) > 1:
        ints = [str(f) for f, k in kinds.items() if k == "int"]
        names = [(str(f), next(v for v in lab if _label_kind([v]) == "name"))
                 for f, lab in labelled if kinds[f] == "name"]
        raise ValueError(f"labels are integers in {', '.join(ints)} but class names in "
                         f"{', '.join(f'{f} (e.g. {v!r})' for f, v in names)}: one corpus needs "
                         f"one kind of label")
    if not labelled or next(iter(kinds.values())) == "int":
        return {f: np.asarray(lab, np.int64) for f, lab in labelled}, None
    names = sorted({str(v) for _, lab in labelled for v in lab})
    index = {n: i for i, n in enumerate(names)}
    return {f: np.asarray([index[str(v)] for v in lab], np.int64) for f, lab in labelled}, \
        tuple(names)


def load_corpus(path: str | os.PathLike, *, text_column: str | None = None,
                label_column: str | None = None) -> dict[str, CorpusSplit]:
    """Read a corpus directory (or file) into splits ``{"train": ..., ["validation"], ["test"]}``.

    Labels come from the ``label`` column when files have one, or from ``label_column`` (then
    every table file must have it). Integer labels are kept; class names get one mapping over
    all files (``CorpusSplit.label_names``), so a name has the same id in every split.

    Raises:
      ValueError: no readable file, an empty corpus, no text column, a row without text or label
        (file and line named), a file that is not UTF-8 or not valid JSONL/CSV/Parquet, labels
        present in some files of a split and not in others, integer labels in some files and
        class names in others, or a ``label_column`` some table file lacks.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ValueError(f"corpus path {path} does not exist")
    files = [path] if path.is_file() else sorted(
        p for p in path.iterdir() if p.is_file() and p.suffix in FORMATS)
    if not files:
        raise ValueError(f"{path} holds no {', '.join(FORMATS)} file")
    items = []
    for f in files:
        if f.suffix not in FORMATS:
            raise ValueError(f"unsupported corpus file {f} (use {', '.join(FORMATS)})")
        if f.suffix == ".txt":
            texts = [line for line in _read_text(f).splitlines() if line.strip()]
            labels = None
        else:
            texts, labels = _read_table(f, text_column, label_column)
        items.append((f, texts, labels))
    ids, names = _label_ids(items)
    parts: dict[str, list] = {}
    for f, texts, labels in items:
        parts.setdefault(split_of(f), []).append((f, texts, labels))
    out = {}
    for split, members in parts.items():
        has = [lab is not None for _, _, lab in members]
        if any(has) and not all(has):
            raise ValueError(f"split {split}: labels in some files but not in others "
                             f"({', '.join(str(f) for f, _, _ in members)})")
        texts = np.asarray([t for _, ts, _ in members for t in ts], dtype=object)
        labels = (np.concatenate([ids[f] for f, _, _ in members]) if all(has) else None)
        out[split] = CorpusSplit(texts, labels, tuple(str(f) for f, _, _ in members),
                                 names if all(has) else None)
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

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - the tokenizers library raises its own exception type
        detail = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise ValueError(f"{path}: not a valid tokenizer.json ({detail})") from None
    pad = _first_present(tok, ("[PAD]", "<pad>", "<|padding|>", "<|pad|>"))
    if pad is None:
        raise ValueError(f"{path} has no padding token ([PAD], <pad>, <|padding|>)")
    return AnyTokenizer(tok, f"tokenizer.json:{path.resolve()}", pad,
                        _first_present(tok, ("[CLS]", "<s>", "<bos>")),
                        _first_present(tok, ("[SEP]", "</s>", "<eos>")))


def corpus_tokens(texts: Sequence[str], tokenizer: TextTokenizer, num_positions: int, *,
                  keep_special: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens [M, num_positions] int32, lengths [M])`` of ``texts`` (padded with the
    tokenizer's pad id), ready for ``posjax.geometry.positional_distributions``.

    Raises:
      ValueError: ``texts`` is one string (a sequence of strings is needed) or holds a
        non-string.
    """
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"corpus_tokens needs a sequence of texts, got one string "
                         f"{texts[:40]!r}; pass [text]")
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise ValueError(f"corpus_tokens: text {bad} is {type(texts[bad]).__name__}, not a str")
    enc = tokenizer.encode(texts, num_positions, keep_special=keep_special)
    return enc.tokens, enc.lengths
