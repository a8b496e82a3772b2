"""Real English text on every machine: the standard library's own docstrings.

Every Python installation ships thousands of human-written docstrings. :func:`stdlib_sentences`
reads them with :mod:`ast` from the source files under ``sysconfig.get_paths()["stdlib"]`` (no
module is ever imported), keeps the prose paragraphs (doctest sessions, indented code, reST
directives, tables and bullet lists dropped), splits them into sentences, keeps those that look
like English sentences (a capital first letter, a final ``.``, ``!`` or ``?``, at least
``min_words`` words, mostly letters) and removes duplicates, keeping the first occurrence.
Files are visited in sorted order of their path relative to the stdlib root and nodes in
source order, so the list is deterministic within one interpreter; :func:`stdlib_digest` is the
SHA-256 of the list and :data:`STDLIB_DIGESTS` records it (with the size) per Python version.
Test packages (``test``, ``tests``, ``idle_test``) and ``site-packages`` are not read.
:func:`package_sentences` reads an installed package's docstrings the same way (``"numpy"``,
``"scipy"``: a second real corpus, not derived from the standard library).

Size (CPython 3.11.7, ``min_words=5``, measured): 734 source files give 10,602 sentences of
132,858 words (about 5 s to parse on one CPU core; cached per process). The counts and the digest
are in :data:`STDLIB_DIGESTS` and checked by ``tests/data/test_stdlib_text.py`` (slow test).

:func:`stdlib_stream` concatenates the tokenised sentences into one contiguous stream and cuts
it into windows of ``n`` tokens (``[num_windows, n]`` int32), which — unlike single sentences —
has as many samples at position 500 as at position 0 (E1 at ``n = 512``, MLM training).

:func:`word_order_task` is a *labelled* stand-in for SST-2 / IMDB when nothing can be
downloaded: original sentence (label 1) vs the same sentence with its words shuffled inside
windows of ``window`` words (label 0). Both versions hold the same multiset of words (and so the
same multiset of WordPiece tokens), so a model blind to positions is at chance; only word order
separates the classes. A topical label (e.g. the module family) would not do: it can be solved
from the bag of words alone.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import os
import platform
import re
import sysconfig
from pathlib import Path
from typing import Any, Sequence

import numpy as np

SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages",
                          "__pycache__"})

# platform.python_version() -> (files read, sentences, SHA-256 of the sentence list) at the
# default min_words; written from a run of stdlib_sentences() on that interpreter.
STDLIB_DIGESTS: dict[str, tuple[int, int, str]] = {
    "3.11.7": (734, 10602, "1cc8b792d13cdec65e75205e0c11579f4bdbcf4047af56734593b39bf0131e41"),
}

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z])")
_LIST_ITEM = re.compile(r"^\s*([-*+•]|\d+[.)]|[a-zA-Z][.)])\s")
_FIELD = re.compile(r"^\s*:[\w ]+:")  # reST field list (:param x: ...)


def stdlib_root() -> Path:
    """The directory of the standard library's source files of this interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: str | os.PathLike | None = None) -> list[Path]:
    """Every ``.py`` file under ``root`` (default: :func:`stdlib_root`) in sorted order of its
    relative path, test packages and ``site-packages`` excluded."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise ValueError(f"stdlib directory {root} does not exist")
    out = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if not SKIPPED_DIRS.intersection(rel.parts[:-1]):
            out.append(rel)
    return [root / rel for rel in sorted(out, key=lambda p: p.as_posix())]


def _docstrings(source: str) -> list[str]:
    """The docstrings of a module's source in source order (module, classes, functions)."""
    tree = ast.parse(source)
    out = []
    nodes = [tree]
    while nodes:  # depth-first, in source order
        node = nodes.pop()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                out.append(doc)
        nodes.extend(reversed([c for c in ast.iter_child_nodes(node)
                               if isinstance(c, (ast.ClassDef, ast.FunctionDef,
                                                 ast.AsyncFunctionDef, ast.If, ast.Try))]))
    return out


def _prose_paragraphs(doc: str) -> list[str]:
    """The prose paragraphs of one docstring, each joined into one line."""
    out = []
    for para in re.split(r"\n\s*\n", doc):
        lines = [line for line in para.splitlines() if line.strip()]
        if not lines:
            continue
        first = lines[0]
        if (first.startswith((" ", "\t", ">>>", "..", "|", "+", "=", "-", "$", "%", "#"))
                or any(line.lstrip().startswith(">>>") for line in lines)
                or _LIST_ITEM.match(first) or _FIELD.match(first)
                or any(line.startswith((" ", "\t")) for line in lines[1:])  # definition list
                or first.rstrip().endswith("::")):
            continue
        out.append(" ".join(line.strip() for line in lines))
    return out


def _is_sentence(s: str, min_words: int) -> bool:
    words = s.split()
    if len(words) < min_words or not s[0].isupper() or s[-1] not in ".!?":
        return False
    if s.endswith(("e.g.", "i.e.", "etc.")) or "  " in s or "::" in s or ">>>" in s:
        return False
    chars = [c for c in s if not c.isspace()]
    letters = sum(c.isalpha() for c in chars)
    return letters >= 0.8 * len(chars) and not any(c in s for c in "{}<>=\\_`*@#$|~^")


def split_sentences(text: str, *, min_words: int = 5) -> list[str]:
    """The sentences of a prose ``text`` (split after ``.``, ``!``, ``?`` before a capital)
    that pass the sentence filter (capital start, final punctuation, ``min_words`` words,
    at least 80 % letters, no code characters)."""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s
            and _is_sentence(s, min_words)]


@functools.lru_cache(maxsize=8)
def _sentences(files: tuple[str, ...], min_words: int) -> tuple[tuple[str, ...], int]:
    seen: dict[str, None] = {}
    read = 0
    for file in files:
        try:
            source = Path(file).read_text(encoding="utf-8")
            docs = _docstrings(source)
        except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
            continue  # Python-2 fixtures, other encodings: skipped, deterministically
        read += 1
        for doc in docs:
            for para in _prose_paragraphs(doc):
                for s in split_sentences(para, min_words=min_words):
                    seen.setdefault(s, None)
    return tuple(seen), read


def stdlib_sentences(*, min_words: int = 5, max_sentences: int | None = None,
                     files: Sequence[str | os.PathLike] | None = None,
                     root: str | os.PathLike | None = None) -> list[str]:
    """Deduplicated English sentences from the docstrings of the standard library.

    Args:
      min_words: shortest sentence kept (whitespace-separated words), ``>= 1``.
      max_sentences: keep only the first this many (``None``: all).
      files: read only these source files (in the given order) instead of the whole library
        (tests, quick runs).
      root: the library directory (default ``sysconfig.get_paths()["stdlib"]``).

    Returns:
      ``[M]`` sentences, first occurrences in file order (deterministic within one interpreter;
      :func:`stdlib_digest` fingerprints the list).

    Raises:
      ValueError: ``min_words < 1``, ``max_sentences < 1``, a missing root or file, or no
        sentence found.
    """
    if min_words < 1:
        raise ValueError(f"min_words must be >= 1, got {min_words}")
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1 or None, got {max_sentences}")
    if files is None:
        paths = tuple(str(p) for p in stdlib_files(root))
    else:
        paths = tuple(str(Path(p)) for p in files)
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            raise ValueError(f"stdlib_sentences: no such source file {missing[0]}")
    sentences, _ = _sentences(paths, min_words)
    if not sentences:
        raise ValueError(f"no docstring sentence of >= {min_words} words in {len(paths)} files")
    return list(sentences[:max_sentences] if max_sentences else sentences)


def package_root(name: str) -> Path:
    """The source directory of an installed top-level package, found with
    ``importlib.util.find_spec`` (which does not run the package)."""
    import importlib.util

    if "." in name:
        raise ValueError(f"package_root takes a top-level package name, got {name!r}")
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{name!r} is not an installed package with source files")
    return Path(list(spec.submodule_search_locations)[0])


def package_sentences(name: str, *, min_words: int = 5, max_sentences: int | None = None
                      ) -> list[str]:
    """:func:`stdlib_sentences` of an installed third-party package's docstrings (e.g.
    ``"numpy"``, ``"scipy"``): a second real-text corpus not derived from the standard library
    (its size depends on the installed version; record :func:`stdlib_digest` of it)."""
    return stdlib_sentences(min_words=min_words, max_sentences=max_sentences,
                            root=package_root(name))


def stdlib_files_read(*, min_words: int = 5, root: str | os.PathLike | None = None) -> int:
    """How many source files :func:`stdlib_sentences` could parse (the rest are skipped)."""
    return _sentences(tuple(str(p) for p in stdlib_files(root)), min_words)[1]


def stdlib_digest(sentences: Sequence[str] | None = None) -> str:
    """SHA-256 (hex) of a sentence list joined by newlines (default: the whole default corpus);
    compare with ``STDLIB_DIGESTS[platform.python_version()]``."""
    if sentences is None:
        sentences = stdlib_sentences()
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()


def recorded_digest() -> tuple[int, int, str] | None:
    """``(files, sentences, digest)`` recorded for this interpreter's version, or None."""
    return STDLIB_DIGESTS.get(platform.python_version())


def _raw_tokenizer(tokenizer: Any) -> Any:
    return getattr(tokenizer, "tokenizer", tokenizer)


def token_stream(texts: Sequence[str], tokenizer: Any) -> np.ndarray:
    """The content tokens (no specials) of ``texts`` concatenated in order, ``[T]`` int32.

    ``tokenizer`` is a :class:`posjax.data.text.TextTokenizer` or a ``tokenizers.Tokenizer``.
    """
    tok = _raw_tokenizer(tokenizer)
    tok.no_truncation()
    tok.no_padding()
    encoded = tok.encode_batch([str(t) for t in texts], add_special_tokens=False)
    if not encoded:
        return np.zeros(0, np.int32)
    return np.concatenate([np.asarray(e.ids, np.int32) for e in encoded])


def stdlib_stream(tokenizer: Any, n: int, *, sentences: Sequence[str] | None = None,
                  specials: bool = False, max_windows: int | None = None,
                  min_words: int = 5) -> np.ndarray:
    """A contiguous token stream of the stdlib sentences cut into windows of ``n`` tokens.

    The sentences (default :func:`stdlib_sentences` at ``min_words``; any list may be passed)
    are tokenised without special tokens and concatenated in order; the stream is cut into
    ``floor(T / n)`` consecutive windows (the remainder dropped). With ``specials=True`` each
    window is ``[CLS] + (n - 2) stream tokens + [SEP]`` (BERT inputs, no padding anywhere).

    Returns:
      ``[num_windows, n]`` int32 token ids.

    Raises:
      ValueError: ``n`` too small, or the stream is shorter than one window.
    """
    if n < (3 if specials else 1):
        raise ValueError(f"window length n={n} is too short" + (" for [CLS] ... [SEP]"
                                                               if specials else ""))
    if max_windows is not None and max_windows < 1:
        raise ValueError(f"max_windows must be >= 1 or None, got {max_windows}")
    if sentences is None:
        sentences = stdlib_sentences(min_words=min_words)
    stream = token_stream(sentences, tokenizer)
    body = n - 2 if specials else n
    count = len(stream) // body
    if max_windows is not None:
        count = min(count, max_windows)
    if count == 0:
        raise ValueError(f"the token stream has {len(stream)} tokens, fewer than one window of "
                         f"{body}")
    windows = stream[:count * body].reshape(count, body)
    if specials:
        cls, sep = tokenizer.special_ids
        windows = np.concatenate([np.full((count, 1), cls, np.int32), windows,
                                  np.full((count, 1), sep, np.int32)], axis=1)
    return np.ascontiguousarray(windows, dtype=np.int32)


def local_shuffle(words: Sequence[str], window: int, rng: np.random.Generator) -> list[str]:
    """``words`` with each consecutive block of ``window`` words permuted by a non-identity
    permutation (a last block of one word stays); the result always differs from ``words``
    when some block holds two different words."""
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    out = []
    for start in range(0, len(words), window):
        block = list(words[start:start + window])
        if len(block) > 1 and len(set(block)) > 1:
            while True:
                perm = [block[i] for i in rng.permutation(len(block))]
                if perm != block:
                    break
            block = perm
        out.append(block)
    return [w for b in out for w in b]


def word_order_task(sentences: Sequence[str] | None = None, *, window: int = 3, seed: int = 0,
                    validation_fraction: float = 0.2, min_words: int = 8,
                    max_sentences: int | None = None) -> dict[str, Any]:
    """A labelled task only word order can solve: original (1) vs locally shuffled (0).

    It stands in for SST-2 / IMDB where nothing can be downloaded. Each sentence (default the
    stdlib sentences of ``>= min_words`` words) gives one example; a seeded balanced half of
    them is locally shuffled (:func:`local_shuffle` with ``window``). Both classes hold the same
    bag of words, so a position-blind model is at chance (50 %). Sentences are split into train
    and validation (not examples), so no sentence appears in both.

    Returns:
      ``{"train": CorpusSplit, "validation": CorpusSplit}`` with ``label_names = ("shuffled",
      "original")``.

    Raises:
      ValueError: fewer than 4 usable sentences, ``window < 2``, or a ``validation_fraction``
        outside ``(0, 1)``.
    """
    from posjax.data.corpus import CorpusSplit

    if not 0 < validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    if sentences is None:
        sentences = stdlib_sentences(min_words=min_words, max_sentences=max_sentences)
    usable = [s for s in sentences if len(set(s.split())) > 1 and len(s.split()) >= 2]
    if len(usable) < 4:
        raise ValueError(f"word_order_task needs >= 4 sentences of >= 2 distinct words, got "
                         f"{len(usable)}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(usable))
    labels = np.zeros(len(usable), np.int64)
    labels[order[: len(usable) // 2]] = 1  # balanced: half originals
    texts = []
    for s, label in zip(usable, labels):
        texts.append(s if label == 1 else " ".join(local_shuffle(s.split(), window, rng)))
    split = rng.permutation(len(usable))
    n_val = max(1, int(round(validation_fraction * len(usable))))
    parts = {"validation": np.sort(split[:n_val]), "train": np.sort(split[n_val:])}
    names = ("shuffled", "original")
    return {k: CorpusSplit(np.asarray([texts[i] for i in idx], dtype=object), labels[idx],
                           ("stdlib-docstrings:word-order",), names)
            for k, idx in (("train", parts["train"]), ("validation", parts["validation"]))}
