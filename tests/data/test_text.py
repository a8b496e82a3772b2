"""Tests of posjax.data.text: SST-2/IMDB loading through `datasets` from local files written
here (the hub is unreachable on this machine and is never contacted), and WordPiece
tokenisation."""
import json
import socket
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from posjax.data import load_text_classification
from posjax.data.text import find_split_file, hub_reachable, vocab_tokenizer, wordpiece_tokenizer

TEXTS = ["a fine film", "dull and slow", "great acting, great plot", "bad", "it was ok I guess"]
LABELS = [1, 0, 1, 0, 1]


def write(path, rows, fmt):
    if fmt == "parquet":
        pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]} if rows else
                                {"text": pa.array([], pa.string()),
                                 "label": pa.array([], pa.int64())}), path)
    elif fmt == "jsonl":
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    else:
        import csv

        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["text", "label"])
            w.writeheader()
            w.writerows(rows)


@pytest.fixture
def offline(monkeypatch):
    """Point the hub at a closed local port so that no test can reach the network."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("POSJAX_DATA_DIR", raising=False)


@pytest.mark.parametrize("fmt,column", [("parquet", "sentence"), ("csv", "text"),
                                        ("jsonl", "text")])
def test_local_files_load_through_datasets(tmp_path, offline, fmt, column):
    rows = [{column: t, "label": y} for t, y in zip(TEXTS, LABELS)]
    write(tmp_path / f"train.{fmt}", rows, fmt)
    data = load_text_classification("sst2", "train", data_dir=str(tmp_path),
                                    cache_dir=str(tmp_path / "cache"))
    assert list(data.texts) == TEXTS
    assert data.labels.dtype == np.int64 and data.labels.tolist() == LABELS
    assert data.source == f"local:{tmp_path / f'train.{fmt}'}" and data.num_classes == 2


def test_env_dir_and_split_alias(tmp_path, offline, monkeypatch):
    write(tmp_path / "dev.jsonl", [{"text": t, "label": y} for t, y in zip(TEXTS, LABELS)],
          "jsonl")
    monkeypatch.setenv("POSJAX_DATA_DIR", str(tmp_path))
    data = load_text_classification("sst2", "validation", cache_dir=str(tmp_path / "c"))
    assert len(data) == 5 and data.split == "validation"


def test_imdb_rejects_sentence_column(tmp_path, offline):
    write(tmp_path / "train.jsonl", [{"sentence": "x", "label": 0}], "jsonl")
    with pytest.raises(ValueError, match=r"train\.jsonl has no text column.*'text'.*sentence"):
        load_text_classification("imdb", "train", data_dir=str(tmp_path),
                                 cache_dir=str(tmp_path / "c"))


def test_missing_label_column_names_file_and_column(tmp_path, offline):
    write(tmp_path / "train.csv", [{"text": "x", "polarity": 1}], "csv")
    with pytest.raises(ValueError, match=r"train\.csv has no 'label' column \(found \['text', "
                                         r"'polarity'\]\)"):
        load_text_classification("sst2", "train", data_dir=str(tmp_path),
                                 cache_dir=str(tmp_path / "c"))


def test_labels_out_of_range(tmp_path, offline):
    write(tmp_path / "test.parquet", [{"text": "x", "label": 0}, {"text": "y", "label": -1}],
          "parquet")
    with pytest.raises(ValueError, match=r"column 'label' of .*test\.parquet has 1 labels "
                                         r"outside \[0, 2\)"):
        load_text_classification("imdb", "test", data_dir=str(tmp_path),
                                 cache_dir=str(tmp_path / "c"))


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_empty_split(tmp_path, offline, fmt):
    write(tmp_path / f"train.{fmt}", [], fmt)
    with pytest.raises(ValueError, match=rf"train\.{fmt} is empty"):
        load_text_classification("sst2", "train", data_dir=str(tmp_path))


def test_unknown_dataset_split_and_missing_file(tmp_path, offline):
    with pytest.raises(ValueError, match="unknown text dataset 'mnist'; known: imdb, sst2"):
        load_text_classification("mnist", "train", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="unknown split 'validation' of imdb"):
        load_text_classification("imdb", "validation", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"train\.parquet, train\.csv, train\.jsonl"):
        find_split_file(str(tmp_path), "imdb", "train")


def test_hub_unreachable_fails_fast_naming_both_ways(offline):
    t0 = time.perf_counter()
    with pytest.raises(FileNotFoundError) as e:
        load_text_classification("imdb", "train", hub_timeout=2.0)
    assert time.perf_counter() - t0 < 5.0
    msg = str(e.value)
    assert "unreachable" in msg and "--data-dir" in msg and "POSJAX_DATA_DIR" in msg
    assert "stanfordnlp/imdb" in msg and "\n" not in msg


def test_hub_probe_times_out_on_a_silent_server(monkeypatch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # accepts the TCP handshake, never answers
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        t0 = time.perf_counter()
        ok, reason = hub_reachable(timeout=0.5)
        assert not ok and time.perf_counter() - t0 < 3.0
        assert "127.0.0.1" in reason
    finally:
        server.close()


def test_offline_env_skips_the_probe(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ok, reason = hub_reachable(timeout=30)
    assert not ok and "offline" in reason


CORPUS = [f"the {a} movie was {b} and {c}" for a in ("long", "short", "new", "old")
          for b in ("good", "bad", "great", "awful") for c in ("fun", "slow", "loud")]


def test_wordpiece_training_padding_truncation_and_cache(tmp_path):
    cache = tmp_path / "tok.json"
    tok = wordpiece_tokenizer(CORPUS, vocab_size=120, cache_path=str(cache))
    assert cache.exists() and tok.pad_id == 0 and tok.special_ids == (2, 3)
    enc = tok.encode(["the good movie", CORPUS[0] + " " + CORPUS[1]], 8)
    assert enc.tokens.shape == (2, 8) and enc.tokens.dtype == np.int32
    assert enc.lengths.tolist() == [5, 8]  # [CLS] the good movie [SEP] / truncated to 8
    assert enc.padding_mask.tolist()[0] == [True] * 5 + [False] * 3
    assert enc.tokens[0, 0] == 2 and enc.tokens[0, 4] == 3 and (enc.tokens[0, 5:] == 0).all()
    assert enc.tokens[1, 0] == 2 and enc.tokens[1, 7] == 3  # truncation keeps [SEP]
    bare = tok.encode(["the good movie"], 8, keep_special=False)
    assert bare.lengths.tolist() == [3] and bare.tokens[0, 0] == enc.tokens[0, 1]
    again = wordpiece_tokenizer([], vocab_size=120, cache_path=str(cache))  # from the cache
    assert np.array_equal(again.encode(["the good movie"], 8).tokens, enc.tokens[:1])
    with pytest.raises(ValueError, match="too short"):
        tok.encode(["x"], 2)


def test_bert_vocab_file(tmp_path):
    vocab = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "good", "movie",
             "##s"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    tok = vocab_tokenizer(str(path))
    enc = tok.encode(["The good movies zebra"], 8)
    assert enc.tokens[0].tolist() == [3, 6, 7, 8, 9, 2, 4, 0]
    path.write_text("the\ngood\n")
    with pytest.raises(ValueError, match="lacks the special tokens"):
        vocab_tokenizer(str(path))


def test_unreadable_file_is_one_line_error(tmp_path, offline):
    (tmp_path / "train.parquet").write_bytes(b"not a parquet file at all")
    with pytest.raises(ValueError, match=r"could not read .*train\.parquet") as e:
        load_text_classification("sst2", "train", data_dir=str(tmp_path),
                                 cache_dir=str(tmp_path / "c"))
    assert "\n" not in str(e.value)


def test_missing_data_directory_names_its_source_and_the_expected_files(tmp_path, monkeypatch):
    from posjax.data.text import ENV_DATA_DIR, load_text_classification

    missing = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"from data_dir \(--data-dir\).*train\.parquet"):
        load_text_classification("sst2", "train", data_dir=missing)
    monkeypatch.setenv(ENV_DATA_DIR, missing)
    with pytest.raises(FileNotFoundError, match=rf"from \${ENV_DATA_DIR}.*validation\.parquet"):
        load_text_classification("sst2", "validation")


def test_geometry_benchmark_refuses_zero_repeats():
    from benchmarks.geometry import main

    with pytest.raises(SystemExit):
        main(["--repeats", "0"])
