"""LST generator (arXiv 2406.08272): validity, unique answers, complexity labels checked by an
independent brute-force solver over the 576 Latin squares of order 4."""
import itertools

import numpy as np
import pytest

from posjax.data import latin_square as ls


def _brute_squares():
    """The 576 squares by plain enumeration (independent of ls.latin_squares)."""
    perms = list(itertools.permutations(range(1, 5)))
    out = []
    for rows in itertools.product(perms, repeat=4):
        if all(len({r[c] for r in rows}) == 4 for c in range(4)):
            out.append(rows)
    return np.array(out)


SQUARES = _brute_squares()


def _determined(givens: np.ndarray, cells: np.ndarray, query: int):
    """Values at ``query`` over all squares agreeing with ``givens`` on the boolean ``cells``."""
    flat = SQUARES.reshape(len(SQUARES), 16)
    use = cells & (givens >= 1) & (givens <= 4)
    ok = (flat[:, use] == givens[use]).all(1)
    return set(flat[ok, query].tolist())


def _lines(q):
    r, c = divmod(q, 4)
    idx = np.arange(16)
    row, col = idx // 4 == r, idx % 4 == c
    others = [idx // 4 == i for i in range(4) if i != r] + [idx % 4 == j for j in range(4) if j != c]
    return row, col, others


def brute_level(grid: np.ndarray, query: int) -> int:
    """Smallest number of line vectors whose givens force the query (1, 2, 3) or 0."""
    g = grid.reshape(16)
    row, col, others = _lines(query)
    if len(_determined(g, row, query)) == 1 or len(_determined(g, col, query)) == 1:
        return 1
    if len(_determined(g, row | col, query)) == 1:
        return 2
    if any(len(_determined(g, row | col | extra, query)) == 1 for extra in others):
        return 3
    return 0


def test_latin_squares_enumeration():
    sq = ls.latin_squares()
    assert sq.shape == (576, 4, 4)
    assert len({s.tobytes() for s in sq.astype(np.int8)}) == 576
    assert {s.astype(np.int8).tobytes() for s in sq} == {s.astype(np.int8).tobytes() for s in SQUARES}


def test_sampled_squares_are_latin():
    rng = np.random.default_rng(0)
    for sampler in ls.SAMPLERS:
        sq = ls.sample_squares(rng, 200, sampler)
        assert (np.sort(sq, axis=1) == np.arange(1, 5)[:, None]).all()
        assert (np.sort(sq, axis=2) == np.arange(1, 5)).all()


@pytest.fixture(scope="module")
def puzzles():
    return ls.generate(90, seed=3)


def test_generated_puzzles_valid_unique_and_labelled(puzzles):
    assert puzzles["grid"].shape == (90, 4, 4)
    assert np.bincount(puzzles["complexity"], minlength=4)[1:].tolist() == [30, 30, 30]
    for g, a, lv, sol, q in zip(puzzles["grid"], puzzles["answer"], puzzles["complexity"],
                                puzzles["solution"], puzzles["query"]):
        flat = g.reshape(16)
        assert (flat == 5).sum() == 1 and flat[q] == 5
        assert any((sol == s).all() for s in SQUARES)           # a valid Latin square
        given = (flat >= 1) & (flat <= 4)
        assert (flat[given] == sol.reshape(16)[given]).all()     # consistent with the grid
        assert sol.reshape(16)[q] == a
        assert _determined(flat, np.ones(16, bool), q) == {a}    # the answer is unique
        assert brute_level(g, q) == lv                           # verifier == brute force


def test_verifier_matches_brute_force_on_every_blank():
    rng = np.random.default_rng(7)
    grids = ls.pluck(rng, ls.sample_squares(rng, 40), "hidden_single", 9)
    levels = ls._all_cell_levels(grids).reshape(40, 16)
    checked = 0
    for g, lv in zip(grids, levels):
        for q in np.nonzero(g.reshape(16) == 0)[0]:
            brute = brute_level(g, q)
            if lv[q] in (1, 2):
                assert brute == lv[q]
            elif lv[q] == 3:
                assert brute == 3           # the chain rule uses three line vectors
            else:
                assert brute in (0, 3)      # unlabelled: not forced by its row and column
            checked += 1
    assert checked > 200


def test_hidden_single_quaternary_rule_is_sound():
    rng = np.random.default_rng(11)
    grids = ls.pluck(rng, ls.sample_squares(rng, 60), "hidden_single", 9)
    levels = ls._all_cell_levels(grids, "hidden_single").reshape(60, 16)
    for g, lv in zip(grids, levels):
        for q in np.nonzero(lv == 3)[0]:
            assert len(_determined(g.reshape(16), np.ones(16, bool), q)) == 1


def test_complexity_of_counts_query_mark_as_blank():
    g = np.array([[1, 2, 3, 5], [0] * 4, [0] * 4, [0] * 4])
    assert ls.complexity_of(g[None], np.array([3])).tolist() == [1]
    g = np.array([[1, 2, 0, 5], [0, 0, 0, 3], [0] * 4, [0] * 4])
    assert ls.complexity_of(g[None], np.array([3])).tolist() == [2]


def test_generate_is_seeded(puzzles):
    again = ls.generate(90, seed=3)
    assert all((again[k] == puzzles[k]).all() for k in puzzles)
    other = ls.generate(90, seed=4)
    assert not (other["grid"] == puzzles["grid"]).all()


def _cells_jaccard(u, v):
    """Value-wise Jaccard of the companion's environment (older scipy on integer vectors)."""
    nonzero = (u != 0) | (v != 0)
    return ((u != v) & nonzero).sum() / nonzero.sum()


def test_jaccard_cells_and_onehot_reference():
    from scipy.spatial.distance import jaccard

    p = ls.generate(12, seed=1)["grid"]
    d = ls.jaccard_distances(p[:6], p[6:])
    for i in range(6):
        for j in range(6):
            ref = _cells_jaccard(p[i].reshape(-1), p[6 + j].reshape(-1))
            assert d[i, j] == pytest.approx(ref, abs=1e-6)
    onehot = ls.jaccard_distances(p[:1], p[1:2], "onehot")[0, 0]
    a = (p[0].reshape(-1, 1) == np.arange(6)).reshape(-1)
    b = (p[1].reshape(-1, 1) == np.arange(6)).reshape(-1)
    assert onehot == pytest.approx(jaccard(a, b), abs=1e-6)


def test_jaccard_filter_and_exclusion():
    ref = ls.generate(9, seed=5)["grid"]
    out = ls.generate(30, seed=6, exclude=ref, jaccard_min=0.8)
    assert ls.jaccard_distances(out["grid"], ref).min() >= 0.8
    refset = {r.astype(np.int8).tobytes() for r in ref}
    assert not any(g.astype(np.int8).tobytes() in refset for g in out["grid"])


def test_make_splits_small():
    opts = ls.LSTOptions(n_per_condition=20, ood_unique_per_condition=3)
    sp = ls.make_splits(opts, seed=0)
    assert len(sp["train"]["answer"]) == 54 and len(sp["test"]["answer"]) == 6
    assert np.bincount(sp["test"]["complexity"], minlength=4)[1:].tolist() == [2, 2, 2]
    assert len(sp["ood"]["answer"]) == 27
    assert np.bincount(sp["ood"]["complexity"], minlength=4)[1:].tolist() == [9, 9, 9]
    pool = np.concatenate([sp["train"]["grid"], sp["test"]["grid"]])
    assert ls.jaccard_distances(pool, sp["ood"]["grid"]).min() >= 0.8
    # rotations keep the label the verifier assigns
    assert (ls.complexity_of(sp["ood"]["grid"], sp["ood"]["query"]) == sp["ood"]["complexity"]).all()


def test_model_inputs(puzzles):
    x, pos = ls.model_inputs(puzzles["grid"])
    assert x.shape == (90, 16, 5) and x.dtype == np.float32 and pos.tolist() == list(range(16))
    flat = puzzles["grid"].reshape(90, 16)
    assert (x[flat == 0] == 0).all()                       # blank = zero vector
    assert (x[flat == 5][:, 4] == 1).all()
    i, j = np.nonzero((flat >= 1) & (flat <= 4))
    assert (x[i, j, flat[i, j] - 1] == 1).all() and (x.sum(-1)[i, j] == 1).all()


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="pluck_rule"):
        ls.LSTOptions(pluck_rule="magic")
    with pytest.raises(ValueError, match="complexity"):
        ls.generate(3, seed=0, complexity=4)
    with pytest.raises(ValueError, match="cells must be in"):
        ls.model_inputs(np.full((1, 4, 4), 7))


@pytest.mark.slow
def test_full_pool_under_a_minute():
    import time

    t = time.perf_counter()
    sp = ls.make_splits(ls.LSTOptions(), seed=0)
    assert len(sp["train"]["answer"]) == 8100 and len(sp["test"]["answer"]) == 900
    assert time.perf_counter() - t < 60
