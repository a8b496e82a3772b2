"""posjax.data.classification_corpus.shift_task_corpus: the three-regime corpus with the
cyclic-shift detection task (arXiv 2604.05217), its ceiling against a NumPy likelihood ratio."""
import numpy as np

from posjax.data.classification_corpus import shift_task_corpus


def test_shift_task_corpus_is_balanced_and_its_ceiling_is_the_likelihood_ratio():
    c = shift_task_corpus(12, 30, 200, mixing="linear", alpha=0.1, seed=3,
                          train_examples=40, test_examples=21)
    task = c.info["task"]
    assert task["shift"] == 1 and c.num_classes == 2 and c.model_offset == 0  # max(1, 12 // 8)
    assert c.geo_tokens.shape == (200, 12) and (c.geo_lengths == 12).all() and c.pad_id is None
    assert c.train["labels"].sum() == 20 and c.test["labels"].sum() == 10
    P = c.exact_P
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-6)
    # label 1 draws position i from P_{(i + shift) mod n}: predict 1 when that is likelier
    toks, i = c.test["tokens"], np.arange(12)
    llr = (np.log(P[i, toks]) - np.log(P[(i + 1) % 12, toks])).sum(1)
    ceiling = float(((llr < 0).astype(int) == c.test["labels"]).mean())
    assert abs(task["bayes_accuracy"] - ceiling) < 1e-9
    assert shift_task_corpus(12, 30, 10, mixing="linear", alpha=0.1, seed=3, shift=5,
                             train_examples=4, test_examples=4).info["task"]["shift"] == 5
