"""posjax.data.corpus: reading any corpus and any tokenizer, then the geometry pipeline."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from posjax.data.corpus import corpus_tokens, load_corpus, load_tokenizer

LINES = ["the cat sat", "a dog ran on the mat", "the cat ran", "dogs sat on a log"]


def test_formats_splits_and_optional_labels(tmp_path):
    (tmp_path / "a.txt").write_text("\n".join(LINES[:2]) + "\n\n")
    (tmp_path / "b.txt").write_text(LINES[2] + "\n")
    splits = load_corpus(tmp_path)
    assert list(splits) == ["train"] and splits["train"].labels is None
    assert list(splits["train"].texts) == LINES[:3]

    lab = tmp_path / "lab"
    lab.mkdir()
    with open(lab / "train.jsonl", "w") as f:
        f.writelines(json.dumps({"sentence": t, "label": ["neg", "pos"][i % 2]}) + "\n"
                     for i, t in enumerate(LINES))
    pq.write_table(pa.table({"text": LINES[:2], "label": ["pos", "neg"]}), str(lab / "dev.parquet"))
    (lab / "test.csv").write_text("code,label\nx = 1,neg\ny = 2,pos\n")
    s = load_corpus(lab)
    assert set(s) == {"train", "validation", "test"}
    np.testing.assert_array_equal(s["train"].labels, [0, 1, 0, 1])
    np.testing.assert_array_equal(s["validation"].labels, [1, 0])  # class names -> sorted ids
    np.testing.assert_array_equal(s["test"].labels, [0, 1])  # one mapping over all files
    assert s["train"].label_names == ("neg", "pos")
    assert list(s["test"].texts) == ["x = 1", "y = 2"]


def test_bad_corpora_are_named(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_corpus(tmp_path / "missing")
    with pytest.raises(ValueError, match="holds no"):
        load_corpus(tmp_path)
    (tmp_path / "x.jsonl").write_text(json.dumps({"body": "hi"}) + "\n")
    with pytest.raises(ValueError, match="no text column"):
        load_corpus(tmp_path)
    (tmp_path / "x.jsonl").write_text(json.dumps({"text": "hi", "label": 1}) + "\n")
    (tmp_path / "y.txt").write_text("no label here\n")
    with pytest.raises(ValueError, match="labels in some files"):
        load_corpus(tmp_path)


def test_tokenizers_from_json_vocab_and_directory(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(LINES * 5, trainers.BpeTrainer(
        vocab_size=60, special_tokens=["<pad>", "<unk>", "<s>", "</s>"], show_progress=False))
    bpe.save(str(tmp_path / "tokenizer.json"))
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    assert tok.pad_id == 0 and tok.special_ids == (2, 3)
    tokens, lengths = corpus_tokens(LINES, tok, 8)
    assert tokens.shape == (4, 8) and (tokens[lengths < 8][:, -1] == 0).all()
    assert load_tokenizer(tmp_path).source == tok.source  # a directory: its tokenizer.json

    from posjax.data.text import SPECIAL_TOKENS
    vocab = tmp_path / "v"
    vocab.mkdir()
    (vocab / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, "the", "cat", "sat"]) + "\n")
    wp = load_tokenizer(vocab)
    tokens, lengths = corpus_tokens(["the cat sat"], wp, 6, keep_special=True)
    np.testing.assert_array_equal(tokens[0], [2, 5, 6, 7, 3, 0])
    with pytest.raises(ValueError, match="no tokenizer.json or vocab.txt"):
        (tmp_path / "empty").mkdir()
        load_tokenizer(tmp_path / "empty")


def test_geometry_from_a_list_of_strings():
    import jax

    import posjax.geometry as geo
    from posjax.data.text import wordpiece_tokenizer

    texts = [" ".join(["alpha beta gamma delta"][0].split()[i:] + ["x"] * i) for i in range(4)] * 20
    tok = wordpiece_tokenizer(texts, vocab_size=30, min_frequency=1)
    tokens, lengths = corpus_tokens(texts, tok, 5)
    with jax.enable_x64(True):
        P, N = geo.positional_distributions(tokens, lengths=lengths, vocab_size=tok.vocab_size,
                                            num_positions=5, pad_id=tok.pad_id, keep_special=True)
        D = np.asarray(geo.hellinger_matrix(P))
    assert D.shape == (5, 5) and np.allclose(np.diag(D), 0) and (D[np.triu_indices(5, 1)] > 0).all()
