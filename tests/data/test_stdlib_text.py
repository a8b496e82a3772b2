"""posjax.data.stdlib_text: the standard library's docstrings as a real-text corpus."""
import platform
import sys

import numpy as np
import pytest

from posjax.data import stdlib_text as st

SOURCE = '''"""A small module for testing the reader.

It has two sentences in its second paragraph. The second one is here!

>>> this_is_a_doctest()
Should not be read.

    Indented code is not prose. Neither is this line.

- A bullet item is skipped entirely here.
"""
raise SystemExit("importing this file is forbidden")


class Thing:
    """A class docstring with five words or more.

    Short one.
    """

    def method(self):
        """Return the value of the method for the caller."""


def function():
    """Compute something useful for the caller. Then return it to everyone."""
'''

EXPECTED = ["A small module for testing the reader.",
            "It has two sentences in its second paragraph.",
            "The second one is here!",
            "A class docstring with five words or more.",
            "Return the value of the method for the caller.",
            "Compute something useful for the caller.",
            "Then return it to everyone."]


def _few_files():
    root = st.stdlib_root()
    return [root / name for name in ("textwrap.py", "bisect.py", "heapq.py", "fnmatch.py")]


def test_reads_docstrings_with_ast_in_source_order_without_importing(tmp_path):
    (tmp_path / "mod_never_imported.py").write_text(SOURCE)
    (tmp_path / "b.py").write_text('"""Compute something useful for the caller."""\n')
    got = st.stdlib_sentences(files=[tmp_path / "mod_never_imported.py", tmp_path / "b.py"])
    assert got == EXPECTED  # b.py's sentence is a duplicate: kept once, first occurrence
    assert "mod_never_imported" not in sys.modules
    assert st.stdlib_sentences(files=[tmp_path / "mod_never_imported.py"],
                               min_words=7) == [s for s in EXPECTED if len(s.split()) >= 7]
    assert st.stdlib_sentences(files=[tmp_path / "mod_never_imported.py"],
                               max_sentences=2) == EXPECTED[:2]


def test_root_walk_sorted_skips_tests_and_unparsable(tmp_path):
    (tmp_path / "b.py").write_text('"""Bravo is the second file of this tree."""\n')
    (tmp_path / "a.py").write_text('"""Alpha is the first file of this tree."""\n')
    (tmp_path / "py2.py").write_text('"""Never read because of bad syntax."""\nprint "x"\n')
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "c.py").write_text('"""A test file that is not read here."""\n')
    names = [p.name for p in st.stdlib_files(tmp_path)]
    assert names == ["a.py", "b.py", "py2.py"]
    assert st.stdlib_sentences(root=tmp_path) == ["Alpha is the first file of this tree.",
                                                  "Bravo is the second file of this tree."]


def test_real_files_sentences_are_clean_unique_and_deterministic():
    files = _few_files()
    a = st.stdlib_sentences(files=files)
    st._sentences.cache_clear()
    b = st.stdlib_sentences(files=files)
    assert a == b and len(a) > 20 and len(set(a)) == len(a)
    assert st.stdlib_digest(a) == st.stdlib_digest(b)
    assert st.stdlib_digest(a) != st.stdlib_digest(a[1:] + a[:1])  # order matters
    for s in a:
        assert s[0].isupper() and s[-1] in ".!?" and len(s.split()) >= 5
        assert ">>>" not in s and "\n" not in s


def test_split_sentences_filter():
    text = ("Return the sum of a and b for now. See x.y() for more! The value is {a: 1}. "
            "e.g. this is lowercase at the start. Short one.")
    assert st.split_sentences(text) == ["Return the sum of a and b for now."]


def test_stream_windows_are_the_contiguous_stream():
    from tokenizers import Tokenizer, models, pre_tokenizers

    from posjax.data.text import TextTokenizer

    sentences = st.stdlib_sentences(files=_few_files())
    words = sorted({w for s in sentences for w in s.split()})
    vocab = {w: i + 4 for i, w in enumerate(words)} | {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2,
                                                       "[SEP]": 3}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = TextTokenizer(raw, "test")
    flat = np.asarray([vocab[w] for s in sentences for w in s.split()], np.int32)
    np.testing.assert_array_equal(st.token_stream(sentences, tok), flat)
    win = st.stdlib_stream(tok, 16, sentences=sentences)
    assert win.dtype == np.int32 and win.shape == (len(flat) // 16, 16)
    np.testing.assert_array_equal(win.ravel(), flat[: win.size])
    spec = st.stdlib_stream(tok, 16, sentences=sentences, specials=True, max_windows=3)
    assert spec.shape == (3, 16)
    assert (spec[:, 0] == 2).all() and (spec[:, -1] == 3).all()
    np.testing.assert_array_equal(spec[:, 1:-1].ravel(), flat[: 3 * 14])
    with pytest.raises(ValueError, match="fewer than one window"):
        st.stdlib_stream(tok, len(flat) + 1, sentences=sentences)
    with pytest.raises(ValueError, match="too short"):
        st.stdlib_stream(tok, 2, sentences=sentences, specials=True)


def test_word_order_task_needs_order_only():
    sentences = st.stdlib_sentences(files=_few_files(), min_words=8)
    task = st.word_order_task(sentences, window=3, seed=1)
    again = st.word_order_task(sentences, window=3, seed=1)
    train, val = task["train"], task["validation"]
    assert train.label_names == ("shuffled", "original")
    np.testing.assert_array_equal(train.labels, again["train"].labels)
    assert list(train.texts) == list(again["train"].texts)
    labels = np.concatenate([train.labels, val.labels])
    assert abs(labels.mean() - 0.5) <= 0.5 / len(labels) + 1e-9  # balanced
    bag = {tuple(sorted(s.split())): s for s in sentences}
    seen = []
    for split in (train, val):
        for text, label in zip(split.texts, split.labels):
            source = bag[tuple(sorted(text.split()))]  # same bag of words as its sentence
            assert (text == source) == (label == 1)
            seen.append(source)
    assert len(seen) == len(set(seen)) == len(sentences)  # each sentence once: no leak
    with pytest.raises(ValueError, match="window"):
        st.word_order_task(sentences, window=1)


def test_local_shuffle_changes_each_block():
    rng = np.random.default_rng(0)
    words = "a b c d e f g".split()
    out = st.local_shuffle(words, 3, rng)
    assert sorted(out) == sorted(words) and out != words
    for start in (0, 3):
        assert sorted(out[start:start + 3]) == words[start:start + 3]
        assert out[start:start + 3] != words[start:start + 3]
    assert out[6] == "g"


def test_errors_are_named(tmp_path):
    with pytest.raises(ValueError, match="min_words"):
        st.stdlib_sentences(min_words=0, files=_few_files())
    with pytest.raises(ValueError, match="no such source file"):
        st.stdlib_sentences(files=[tmp_path / "missing.py"])
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="no docstring sentence"):
        st.stdlib_sentences(files=[tmp_path / "empty.py"])
    with pytest.raises(ValueError, match="does not exist"):
        st.stdlib_files(tmp_path / "nope")


def test_package_sentences_reads_without_importing(tmp_path, monkeypatch):
    pkg = tmp_path / "fakepkg_never_imported"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""The fake package has one docstring sentence here."""\n'
                                     'raise SystemExit("imported")\n')
    (pkg / "sub.py").write_text('"""A submodule contributes a second sentence too."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert st.package_root("fakepkg_never_imported") == pkg
    assert st.package_sentences("fakepkg_never_imported") == [
        "The fake package has one docstring sentence here.",
        "A submodule contributes a second sentence too."]
    assert "fakepkg_never_imported" not in sys.modules
    with pytest.raises(ValueError, match="not an installed package"):
        st.package_root("no_such_package_xyz")


@pytest.mark.slow
def test_whole_stdlib_matches_the_recorded_digest():
    recorded = st.recorded_digest()
    if recorded is None:
        pytest.skip(f"no digest recorded for Python {platform.python_version()}; add "
                    f"STDLIB_DIGESTS[{platform.python_version()!r}]")
    sentences = st.stdlib_sentences()
    assert (st.stdlib_files_read(), len(sentences), st.stdlib_digest(sentences)) == recorded


def test_word_order_dataset_is_a_labelled_classification_corpus(tmp_path, monkeypatch):
    from posjax.data.classification_corpus import (WORD_ORDER_STAND_IN,
                                                   text_classification_corpus)

    sentences = st.stdlib_sentences(files=_few_files(), min_words=8)
    monkeypatch.setattr(st, "stdlib_sentences", lambda **k: sentences)
    prep = text_classification_corpus("word_order", str(tmp_path), num_positions=8, max_len=16,
                                      seed=1, tokenizer_vocab=200)
    task = st.word_order_task(sentences, seed=1)
    assert prep.num_classes == 2 and prep.info["stands_in_for"] == WORD_ORDER_STAND_IN
    np.testing.assert_array_equal(prep.train["labels"], task["train"].labels)
    np.testing.assert_array_equal(prep.test["labels"], task["validation"].labels)
    assert prep.train["tokens"].shape == (len(task["train"].labels), 16)
    with pytest.raises(ValueError, match="no --data-dir"):
        text_classification_corpus("word_order", str(tmp_path), num_positions=8, max_len=16,
                                   data_dir=str(tmp_path))
