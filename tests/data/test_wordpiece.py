"""posjax.data.wordpiece: the WordPiece trainer of `tokenizers`, with its ties in a fixed order."""
import os
import subprocess
import sys
import sysconfig

import pytest

from posjax.data.text import SPECIAL_TOKENS
from posjax.data.wordpiece import train_wordpiece_vocab, word_counts


def _pipeline():
    from tokenizers import normalizers, pre_tokenizers

    return normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()


def _texts():
    from posjax.data.stdlib_text import stdlib_sentences

    root = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(root, f) for f in ("textwrap.py", "fractions.py", "heapq.py",
                                              "bisect.py", "shlex.py")]
    return stdlib_sentences(files=files, min_words=5)


def _library_vocab(texts, vocab_size, min_frequency):
    from tokenizers import Tokenizer, models, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = _pipeline()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    vocab = tok.get_vocab()
    return sorted(vocab, key=vocab.get)


@pytest.mark.parametrize("vocab_size,min_frequency", [(300, 2), (600, 1)])
def test_equals_the_library_trainer_given_its_id_order(vocab_size, min_frequency):
    """Same algorithm: with the `##` ids in the order the library happened to give them, the
    whole vocabulary, ids included, is the library's."""
    texts = _texts()
    assert len(texts) > 50
    reference = _library_vocab(texts, vocab_size, min_frequency)
    inner = [t for t in reference if t.startswith("##") and len(t) == 3]
    ours = train_wordpiece_vocab(word_counts(texts, *_pipeline()), vocab_size=vocab_size,
                                 special_tokens=SPECIAL_TOKENS, min_frequency=min_frequency,
                                 inner_order=inner)
    assert ours == reference
    assert len(ours) == vocab_size  # enough pairs: stopped by the size, not by the counts


def test_ties_take_the_smaller_pair_and_the_order_is_fixed():
    counts = {"xab": 2, "xcd": 2}  # (x, ##a) and (x, ##c) both seen twice
    vocab = train_wordpiece_vocab(counts, vocab_size=11, special_tokens=("[UNK]",),
                                  min_frequency=1)
    assert vocab == ["[UNK]", "a", "b", "c", "d", "x", "##a", "##b", "##c", "##d", "xa"]
    # with ##c before ##a the tie goes the other way: the library's result depends on it
    swapped = train_wordpiece_vocab(counts, vocab_size=11, special_tokens=("[UNK]",),
                                    min_frequency=1, inner_order=["##c", "##d", "##a", "##b"])
    assert swapped[-1] == "xc"
    # a merge count below min_frequency stops the training before the size
    assert len(train_wordpiece_vocab({"ab": 1}, vocab_size=50, min_frequency=2)) == 3
    # overlapping pairs merge left to right: a ##a ##a -> aa ##a -> aaa
    assert train_wordpiece_vocab({"aaa": 3}, vocab_size=10, min_frequency=1) == [
        "a", "##a", "aa", "aaa"]


def test_same_vocabulary_in_every_process():
    """String hashing changes with PYTHONHASHSEED from process to process (as the library's
    hash maps do): the vocabulary must not."""
    texts = [" ".join(t.split()[:12]) for t in _texts()]
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "posjax", "data")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import wordpiece as w; "
            "from tokenizers import normalizers as n, pre_tokenizers as p; "
            "c = w.word_counts(sys.argv[2:], n.BertNormalizer(lowercase=True), "
            "p.BertPreTokenizer()); print(w.train_wordpiece_vocab(c, vocab_size=300, "
            "min_frequency=1))")
    outs = {subprocess.run([sys.executable, "-c", code, here, *texts], capture_output=True,
                           text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(outs) == 1 and "'##" in outs.pop()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no words"):
        train_wordpiece_vocab({}, vocab_size=10)
    with pytest.raises(ValueError, match="min_frequency"):
        train_wordpiece_vocab({"ab": 2}, vocab_size=10, min_frequency=0)
    with pytest.raises(ValueError, match="inner_order"):
        train_wordpiece_vocab({"abc": 2}, vocab_size=10, inner_order=["##b"])
