"""The Latin Square Task (LST) of arXiv 2406.08272, *Learning (interpretable) positional encodings
in transformers depends on initialization* (arXiv 2406.08272).

A puzzle is a 4x4 grid: 0 = blank, 1-4 = shapes, 5 = the query cell "?". The completed grid is a
Latin square; the target is the shape under "?". Construction (vectorised over puzzles):

1. a random Latin square (row-major fill with restart, or a uniform draw from the 576 squares);
2. plucking: cells are visited in random order and blanked while the blanked value stays
   deducible (``pluck_rule``);
3. the query is drawn uniformly among the blank cells;
4. the verifier labels the query binary (its row or its column alone holds the 3 other shapes),
   ternary (row and column together do) or quaternary (row and column after deducing one other
   blank cell of that row or column from its own row and column); anything else is rejected;
5. the Jaccard filter keeps a candidate only if its one-hot (16 x 6) Jaccard distance to every
   reference puzzle is >= ``jaccard_min``.

The 108 human-study puzzles are not available offline; :func:`make_splits` builds a stand-in
out-of-distribution (OOD) set the same way (``ood_unique_per_condition`` puzzles per condition,
each in ``ood_rotations`` rotations) and filters the generated training pool against it.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any, Sequence

import numpy as np

SIZE = 4
QUERY = 5
CONDITIONS = {1: "binary", 2: "ternary", 3: "quaternary"}
SAMPLERS = ("row_major_fill", "uniform")
PLUCK_RULES = ("hidden_single", "line", "row_col")
QUATERNARY_RULES = ("chain", "hidden_single")
JACCARD_ENCODINGS = ("cells", "onehot")


@dataclasses.dataclass(frozen=True)
class LSTOptions:
    """Every choice of the LST generator (recorded in results files).

    Attributes:
      n_per_condition: puzzles per complexity level in the generated pool (3,000 -> 9,000).
      jaccard_min: minimum one-hot Jaccard distance of a generated puzzle to every OOD puzzle.
      test_fraction: stratified held-out fraction of the pool (0.1 -> 8,100 / 900).
      split_seed: ``random_state`` of the stratified split (42 in the companion code).
      square_sampler: (interpretation) "row_major_fill" (companion: each cell uniform among the
        shapes unused in its row and column, restart on a dead end) or "uniform" (the 576 squares).
      pluck_rule: (interpretation) when a cell with shape v may be blanked: "hidden_single"
        (companion generator: in its row or in its column no other cell can still hold v, each
        other cell being filled or blank with v in its other line), "line" (its row or its column
        alone still holds the 3 other shapes) or "row_col" (row and column name 3 shapes).
      target_blanks: (interpretation) stop plucking at this many blanks (None: until stuck;
        11 = the companion's stop at 5 givens).
      quaternary_rule: (interpretation) "chain" (paper text: one other blank cell of the query's row or
        column is deduced from its own row and column, then the query from its row and column)
        or "hidden_single" (companion verifier: the query's shape is the one shape missing from
        its row (column) that every other blank of that row (column) is denied by its column
        (row)).
      jaccard_encoding: (interpretation) "cells" (companion: ``scipy.spatial.distance.jaccard`` on
        the 16 raw cell values, as older scipy computed it for integer vectors -- the fraction of
        disagreeing cells among cells not blank in both; scipy 1.17 now binarises the inputs) or "onehot"
        (paper text: one-hot 16 x 6 vectors; at 0.8 it accepts ~1e-4 of candidates).
      ood_unique_per_condition, ood_rotations: (interpretation) the OOD stand-in for the human
        set (12 unique x 3 rotations by 90 degrees per condition = 108 puzzles).
      unique: drop duplicate puzzles from the generated pool.
    """

    n_per_condition: int = 3000
    jaccard_min: float = 0.8
    test_fraction: float = 0.1
    split_seed: int = 42
    square_sampler: str = "row_major_fill"
    pluck_rule: str = "hidden_single"
    target_blanks: int | None = 9
    quaternary_rule: str = "chain"
    jaccard_encoding: str = "cells"
    ood_unique_per_condition: int = 12
    ood_rotations: int = 3
    unique: bool = True

    def __post_init__(self):
        if self.n_per_condition <= 0:
            raise ValueError(f"n_per_condition must be positive, got {self.n_per_condition}")
        if not 0.0 <= self.jaccard_min <= 1.0:
            raise ValueError(f"jaccard_min must be in [0, 1], got {self.jaccard_min}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction}")
        if self.square_sampler not in SAMPLERS:
            raise ValueError(f"square_sampler must be one of {SAMPLERS}, got {self.square_sampler!r}")
        if self.pluck_rule not in PLUCK_RULES:
            raise ValueError(f"pluck_rule must be one of {PLUCK_RULES}, got {self.pluck_rule!r}")
        if self.quaternary_rule not in QUATERNARY_RULES:
            raise ValueError(f"quaternary_rule must be one of {QUATERNARY_RULES}, got {self.quaternary_rule!r}")
        if self.jaccard_encoding not in JACCARD_ENCODINGS:
            raise ValueError(f"jaccard_encoding must be one of {JACCARD_ENCODINGS}, got {self.jaccard_encoding!r}")
        if self.target_blanks is not None and not 1 <= self.target_blanks <= SIZE * SIZE:
            raise ValueError(f"target_blanks must be in [1, 16] or None, got {self.target_blanks}")
        if not 1 <= self.ood_rotations <= 4:
            raise ValueError(f"ood_rotations must be in [1, 4], got {self.ood_rotations}")
        if self.ood_unique_per_condition < 0:
            raise ValueError("ood_unique_per_condition must be >= 0")


@functools.lru_cache(maxsize=1)
def latin_squares() -> np.ndarray:
    """All 576 Latin squares of order 4 as ``[576, 4, 4]`` int8 with symbols 1..4."""
    perms = np.array(list(itertools.permutations(range(1, SIZE + 1))), np.int8)  # [24, 4]
    partial = perms[:, None, :]
    for _ in range(SIZE - 1):
        clash = (partial[:, None, :, :] == perms[None, :, None, :]).any(axis=2)  # [P, 24, 4]
        keep = ~clash.any(-1)
        i, j = np.nonzero(keep)
        partial = np.concatenate([partial[i], perms[j][:, None, :]], axis=1)
    partial.setflags(write=False)
    return partial


def _onehot(values: np.ndarray) -> np.ndarray:
    """Presence of shapes 1..4: ``[..., k] -> [..., 4]`` bool (0 and 5 map to nothing)."""
    return (values[..., None] == np.arange(1, SIZE + 1)).any(axis=-2)


def _choose(rng: np.random.Generator, allowed: np.ndarray) -> np.ndarray:
    """Index of a uniformly chosen True entry in each row of ``allowed [m, k]`` (-1 if none)."""
    count = allowed.sum(1)
    u = rng.random(len(allowed)) * np.maximum(count, 1)
    pick = (np.cumsum(allowed, 1) <= u[:, None]).sum(1)
    return np.where(count > 0, np.minimum(pick, allowed.shape[1] - 1), -1)


def sample_squares(rng: np.random.Generator, num: int, sampler: str = "row_major_fill"
                   ) -> np.ndarray:
    """``num`` random Latin squares ``[num, 4, 4]`` (symbols 1..4)."""
    if sampler == "uniform":
        return latin_squares()[rng.integers(len(latin_squares()), size=num)].astype(np.int64)
    if sampler != "row_major_fill":
        raise ValueError(f"square_sampler must be one of {SAMPLERS}, got {sampler!r}")
    out = np.zeros((num, SIZE, SIZE), np.int64)
    todo = np.arange(num)
    while todo.size:
        g = np.zeros((todo.size, SIZE, SIZE), np.int64)
        ok = np.ones(todo.size, bool)
        for cell in range(SIZE * SIZE):
            r, c = divmod(cell, SIZE)
            used = _onehot(np.concatenate([g[:, r, :], g[:, :, c]], axis=1))
            pick = _choose(rng, ~used)
            ok &= pick >= 0
            g[:, r, c] = pick + 1
        out[todo[ok]] = g[ok]
        todo = todo[~ok]
    return out


def pluck(rng: np.random.Generator, squares: np.ndarray, rule: str = "hidden_single",
          target_blanks: int | None = None) -> np.ndarray:
    """Blank cells of ``squares [N, 4, 4]`` in a random order while each stays deducible.

    A cell with shape v may be blanked when, after blanking, v is still forced in it:

    * ``"hidden_single"``: in its column (or its row) every other cell is either filled or blank
      with v present in that cell's row (column), so no other cell of the line can hold v;
    * ``"line"``: its row or its column has no other blank (the line alone names v);
    * ``"row_col"``: the filled cells of its row and column hold the 3 other shapes.

    Blanking only removes information, so one pass over the cells in random order reaches a state
    where no further cell can be blanked (or ``target_blanks`` blanks).
    """
    grid = squares.copy()
    n = len(grid)
    order = np.argsort(rng.random((n, SIZE * SIZE)), axis=1)
    blanks = np.zeros(n, np.int64)
    rows = np.arange(n)
    idx = np.arange(SIZE)
    for step in range(SIZE * SIZE):
        r, c = np.divmod(order[:, step], SIZE)
        v = squares[rows, r, c]
        row = grid[rows, r, :]
        col = grid[rows, :, c]
        if rule == "hidden_single":
            has_v_row = (grid == v[:, None, None]).any(2)   # [N, 4]: row i holds v
            has_v_col = (grid == v[:, None, None]).any(1)   # [N, 4]: column j holds v
            # other cells (i, c) of the column that could hold v: blank, and v absent from row i
            col_free = (col == 0) & ~has_v_row & (idx[None] != r[:, None])
            row_free = (row == 0) & ~has_v_col & (idx[None] != c[:, None])
            ok = ~col_free.any(1) | ~row_free.any(1)
        elif rule == "line":
            # the cell itself is still filled: the line is full iff no zeros in it
            ok = (row > 0).all(1) | (col > 0).all(1)
        elif rule == "row_col":
            others = np.concatenate([row, col], axis=1)
            others = np.where(others == v[:, None], 0, others)
            ok = _onehot(others).sum(1) == SIZE - 1
        else:
            raise ValueError(f"pluck_rule must be one of {PLUCK_RULES}, got {rule!r}")
        if target_blanks is not None:
            ok &= blanks < target_blanks
        grid[rows[ok], r[ok], c[ok]] = 0
        blanks += ok
    return grid


_POPCOUNT = np.array([bin(i).count("1") for i in range(1 << SIZE)], np.int8)
_FULL = (1 << SIZE) - 1


def _bits(grid: np.ndarray) -> np.ndarray:
    """Shape v in 1..4 -> bit 1 << (v - 1); blank and query -> 0."""
    grid = np.asarray(grid)
    return np.where((grid >= 1) & (grid <= SIZE), np.left_shift(1, np.maximum(grid, 1) - 1), 0
                    ).astype(np.int16)


def _all_cell_levels(grid: np.ndarray, rule: str = "chain") -> np.ndarray:
    """Verifier level ``[N, 4, 4]`` of every cell taken as the query (0 where not a valid query).

    Shapes present in a row/column are 4-bit masks, so every test is a handful of integer ops on
    ``[N, 4, 4]`` arrays (see :func:`complexity_of` for the rules).
    """
    bits = _bits(grid)
    blank = bits == 0
    row = np.bitwise_or.reduce(bits, axis=2)                 # [N, 4(r)]
    col = np.bitwise_or.reduce(bits, axis=1)                 # [N, 4(c)]
    union = row[:, :, None] | col[:, None, :]                # [N, r, c]
    binary = (_POPCOUNT[row][:, :, None] == SIZE - 1) | (_POPCOUNT[col][:, None, :] == SIZE - 1)
    ternary = _POPCOUNT[union] == SIZE - 1
    if rule == "chain":
        # naked singles: a blank cell whose row and column givens name 3 shapes
        single = np.where(blank & ternary, _FULL & ~union, 0)
        extra = (np.bitwise_or.reduce(single, axis=2)[:, :, None]
                 | np.bitwise_or.reduce(single, axis=1)[:, None, :])
        quaternary = (_POPCOUNT[union] == SIZE - 2) & ((extra & ~union) != 0)
    elif rule == "hidden_single":
        quaternary = np.zeros_like(blank)
        for k in range(SIZE):
            others = [j for j in range(SIZE) if j != k]
            # query (r, k): every other blank (r, j) of its row is denied shape q by column j
            deny = np.full(row.shape, _FULL, np.int16)
            for j in others:
                deny &= np.where(blank[:, :, j], col[:, None, j], _FULL)
            quaternary[:, :, k] |= (~row & deny & _FULL) != 0
            # query (k, c): every other blank (i, c) of its column is denied shape q by row i
            deny = np.full(col.shape, _FULL, np.int16)
            for i in others:
                deny &= np.where(blank[:, i, :], row[:, None, i], _FULL)
            quaternary[:, k, :] |= (~col & deny & _FULL) != 0
    else:
        raise ValueError(f"quaternary_rule must be one of {QUATERNARY_RULES}, got {rule!r}")
    level = np.select([binary, ternary, quaternary], [1, 2, 3], 0)
    return np.where(blank, level, 0)


def complexity_of(grid: np.ndarray, query: np.ndarray, rule: str = "chain") -> np.ndarray:
    """Verifier: complexity of the query cell of each puzzle (1, 2, 3, or 0 = rejected).

    Args:
      grid: ``[N, 4, 4]`` with 0 blank, 1-4 shapes (a 5 anywhere counts as blank).
      query: ``[N]`` flat query index r*4 + c (a blank cell).
      rule: quaternary rule, "chain" or "hidden_single" (see :class:`LSTOptions`).

    Returns:
      ``[N]`` int: 1 binary (row alone or column alone holds the 3 other shapes), 2 ternary (row
      union column does), 3 quaternary (three vectors: "chain" -- row and column hold 2 shapes
      and one other blank cell of that row or column, deduced from its own row and column,
      supplies a third; "hidden_single" -- every other blank of the row (column) is denied the
      answer by its column (row)), 0 none of these (or the query cell is not blank).
    """
    grid = np.asarray(grid)
    levels = _all_cell_levels(grid, rule).reshape(len(grid), -1)
    return levels[np.arange(len(grid)), np.asarray(query)]


def puzzle_states(grid: np.ndarray) -> np.ndarray:
    """Flat cell states ``[N, 16]`` in 0..5 (blank, shapes, query), row-major."""
    return np.asarray(grid).reshape(len(grid), SIZE * SIZE)


def _match_counts(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equal cells and both-blank cells of every pair, ``[Na, Nb]`` each, by one-hot matmuls."""
    sa, sb = puzzle_states(a), puzzle_states(b)
    states = np.arange(QUERY + 1)
    oa = (sa[..., None] == states).reshape(len(sa), -1).astype(np.float32)
    ob = (sb[..., None] == states).reshape(len(sb), -1).astype(np.float32)
    equal = oa @ ob.T
    both_blank = (sa == 0).astype(np.float32) @ (sb == 0).astype(np.float32).T
    return equal, both_blank


def _jaccard_from_counts(equal: np.ndarray, both_blank: np.ndarray, encoding: str) -> np.ndarray:
    cells = SIZE * SIZE
    if encoding == "onehot":
        return 1.0 - equal / (2 * cells - equal)
    if encoding == "cells":
        either = cells - both_blank
        return np.where(either > 0, 1.0 - (equal - both_blank) / np.maximum(either, 1), 0.0)
    raise ValueError(f"jaccard_encoding must be one of {JACCARD_ENCODINGS}, got {encoding!r}")


def jaccard_distances(a: np.ndarray, b: np.ndarray, encoding: str = "cells") -> np.ndarray:
    """Jaccard distances ``[Na, Nb]`` between puzzles ``a [Na, 4, 4]`` and ``b [Nb, 4, 4]``.

    ``"cells"`` (companion code, older scipy ``jaccard`` on the raw cell values): the fraction of
    cells that differ among the cells not blank in both puzzles. ``"onehot"`` (paper text): Jaccard
    distance of the one-hot 16 x 6 vectors; each has 16 ones, so with m equal cells the distance
    is 1 - m / (32 - m).
    """
    return _jaccard_from_counts(*_match_counts(a, b), encoding)


def _min_jaccard_per_query(grid: np.ndarray, exclude: np.ndarray, encoding: str,
                           wanted: np.ndarray) -> np.ndarray:
    """Min Jaccard distance to ``exclude`` of ``grid`` with its query at each cell: ``[N, 16]``.

    The counts of the query-free grid are computed once; marking a blank cell q as the query (5)
    only changes the counts at that cell. Only cells with ``wanted [N, 16]`` True are evaluated
    (the others get -1).
    """
    equal, both_blank = _match_counts(grid, exclude)
    ref = puzzle_states(exclude)
    out = np.full((len(grid), SIZE * SIZE), -1.0, np.float32)
    for q in range(SIZE * SIZE):
        rows = np.nonzero(wanted[:, q])[0]
        if rows.size == 0:
            continue
        ref_blank = (ref[:, q] == 0).astype(np.float32)[None]
        ref_query = (ref[:, q] == QUERY).astype(np.float32)[None]
        out[rows, q] = _jaccard_from_counts(equal[rows] - ref_blank + ref_query,
                                            both_blank[rows] - ref_blank, encoding).min(1)
    return out


def _candidates(rng: np.random.Generator, num: int, options: LSTOptions, needed: np.ndarray,
                exclude: np.ndarray | None, jaccard_min: float) -> dict[str, np.ndarray]:
    """One vectorised batch: ``num`` plucked grids, every blank cell labelled as a query.

    Each grid yields at most one puzzle: among the still ``needed`` levels [3] that some
    admissible blank cell of the grid has, the rarest one is taken (priority binary, quaternary,
    ternary), then the query uniformly among the blank cells of that level that also pass the
    Jaccard filter.
    """
    squares = sample_squares(rng, num, options.square_sampler)
    grid = pluck(rng, squares, options.pluck_rule, options.target_blanks)
    labels = _all_cell_levels(grid, options.quaternary_rule).reshape(num, -1)
    labels = np.where(needed[np.maximum(labels - 1, 0)], labels, 0)
    if exclude is not None and len(exclude) and jaccard_min > 0:
        dist = _min_jaccard_per_query(grid, exclude, options.jaccard_encoding, labels > 0)
        labels = np.where(dist >= jaccard_min, labels, 0)
    avail = (labels[..., None] == np.arange(1, 4)).any(1)                    # [N, 3]
    level = np.zeros(num, np.int64)
    for lv in (2, 3, 1):  # later assignments win: binary first, then quaternary, then ternary
        level = np.where(avail[:, lv - 1], lv, level)
    query = _choose(rng, labels == level[:, None])
    keep = (level > 0) & (query >= 0)
    grid, squares, query, level = grid[keep], squares[keep], query[keep], level[keep]
    idx = np.arange(len(grid))
    answer = squares.reshape(len(grid), -1)[idx, query]
    flat = grid.reshape(len(grid), -1).copy()
    flat[idx, query] = QUERY
    return {"grid": flat.reshape(-1, SIZE, SIZE), "answer": answer, "complexity": level,
            "solution": squares, "query": query}


def generate(num_puzzles: int, *, seed: int, complexity: int | Sequence[int] | None = None,
             options: LSTOptions | None = None, exclude: np.ndarray | None = None,
             jaccard_min: float | None = None, unique: bool | None = None,
             batch_size: int | None = None, max_batches: int = 400) -> dict[str, np.ndarray]:
    """Generate LST puzzles (arXiv 2406.08272).

    Args:
      num_puzzles: how many to return.
      seed: numpy seed; the output is a deterministic function of (seed, arguments).
      complexity: None (balanced over 1, 2, 3), one level, or a sequence of levels; the count
        is split evenly over the requested levels (remainder to the first ones).
      options: generator choices (:class:`LSTOptions`).
      exclude: reference puzzles ``[M, 4, 4]``; candidates closer than ``jaccard_min`` are dropped.
      jaccard_min: overrides ``options.jaccard_min``.
      unique: overrides ``options.unique`` (drop duplicates, also of ``exclude``).
      batch_size, max_batches: grids per vectorised batch (None: 40 per requested puzzle, within
        [2048, 50000]), and the give-up limit (ValueError).

    Returns:
      dict of numpy arrays: ``grid [N, 4, 4]`` (0 blank, 1-4 shapes, 5 query), ``answer [N]``
      in 1-4, ``complexity [N]`` in 1-3, ``solution [N, 4, 4]`` (the Latin square the puzzle was
      plucked from), ``query [N]`` (flat index of the query cell). Sorted by complexity level.
    """
    options = options or LSTOptions()
    if num_puzzles < 0:
        raise ValueError(f"num_puzzles must be >= 0, got {num_puzzles}")
    levels = [1, 2, 3] if complexity is None else list(np.atleast_1d(complexity).tolist())
    if not levels or any(lv not in CONDITIONS for lv in levels) or len(set(levels)) != len(levels):
        raise ValueError(f"complexity must be None or distinct levels in {sorted(CONDITIONS)}, "
                         f"got {complexity!r}")
    jmin = options.jaccard_min if jaccard_min is None else jaccard_min
    dedupe = options.unique if unique is None else unique
    want = {lv: num_puzzles // len(levels) + (i < num_puzzles % len(levels))
            for i, lv in enumerate(levels)}
    batch_size = batch_size or int(np.clip(40 * num_puzzles, 2048, 50_000))
    rng = np.random.default_rng(seed)
    seen = set()
    if exclude is not None and dedupe:
        seen.update(bytes(row) for row in puzzle_states(np.asarray(exclude)).astype(np.int8))
    kept: dict[int, list[dict[str, np.ndarray]]] = {lv: [] for lv in levels}
    have = {lv: 0 for lv in levels}
    for _ in range(max_batches):
        needed = np.array([have.get(lv, 0) < want.get(lv, 0) for lv in (1, 2, 3)])
        if not needed.any():
            break
        batch = _candidates(rng, batch_size, options, needed, exclude, jmin)
        for i in range(len(batch["grid"])):
            lv = int(batch["complexity"][i])
            if have[lv] >= want[lv]:
                continue
            if dedupe:
                key = bytes(batch["grid"][i].astype(np.int8).reshape(-1))
                if key in seen:
                    continue
                seen.add(key)
            kept[lv].append({k: v[i] for k, v in batch.items()})
            have[lv] += 1
    else:
        if any(have[lv] < want[lv] for lv in levels):
            raise ValueError(f"could not generate {want} puzzles (got {have}); relax jaccard_min "
                             f"({jmin}) or the plucking options")
    rows = [row for lv in levels for row in kept[lv]]
    if not rows:
        return {"grid": np.zeros((0, SIZE, SIZE), np.int64), "answer": np.zeros(0, np.int64),
                "complexity": np.zeros(0, np.int64), "solution": np.zeros((0, SIZE, SIZE), np.int64),
                "query": np.zeros(0, np.int64)}
    return {k: np.stack([row[k] for row in rows]).astype(np.int64) for k in rows[0]}


def rotate(puzzles: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """Rotate every puzzle by k * 90 degrees (rows map to columns: complexity is unchanged)."""
    grid = np.rot90(puzzles["grid"], k, axes=(1, 2))
    out = dict(puzzles, grid=grid.copy(), solution=np.rot90(puzzles["solution"], k, axes=(1, 2)).copy())
    out["query"] = np.argmax(grid.reshape(len(grid), -1) == QUERY, axis=1)
    return out


def concat(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Concatenate puzzle dicts key by key."""
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def take(puzzles: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[idx] for k, v in puzzles.items()}


def make_ood(options: LSTOptions, *, seed: int) -> dict[str, np.ndarray]:
    """Stand-in for the 108 human-study puzzles: per condition ``ood_unique_per_condition``
    distinct puzzles, each in ``ood_rotations`` rotations (0, 90, 180 degrees by default)."""
    base = generate(3 * options.ood_unique_per_condition, seed=seed, options=options, unique=True)
    return concat([rotate(base, k) for k in range(options.ood_rotations)])


def make_splits(options: LSTOptions | None = None, *, seed: int = 0) -> dict[str, Any]:
    """The LST splits: ``train``/``test`` (stratified split of the generated pool) and ``ood``.

    The OOD set is generated first (seed ``seed``); the pool (seed ``seed + 1``) keeps only
    puzzles at Jaccard distance >= ``jaccard_min`` from every OOD puzzle (fallback when too few pass).
    """
    from sklearn.model_selection import train_test_split  # lazy: heavy import

    options = options or LSTOptions()
    ood = make_ood(options, seed=seed)
    pool = generate(3 * options.n_per_condition, seed=seed + 1, options=options, exclude=ood["grid"])
    idx = np.arange(len(pool["answer"]))
    train_idx, test_idx = train_test_split(idx, test_size=options.test_fraction,
                                           random_state=options.split_seed,
                                           stratify=pool["complexity"])
    return {"train": take(pool, np.sort(train_idx)), "test": take(pool, np.sort(test_idx)),
            "ood": ood, "options": dataclasses.asdict(options), "seed": seed}


def model_inputs(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model inputs of puzzles ``grid [N, 4, 4]``.

    Returns:
      ``features [N, 16, 5]`` float32 one-hot of (shape 1-4, query) in row-major order, with a
      blank cell the zero vector (arXiv 2406.08272), and ``positions [16]`` int32 flat indices
      p = r * 4 + c (2-D PEs recover (r, c) with their ``grid_width`` option).
    """
    states = puzzle_states(np.asarray(grid))
    if states.size and (states.min() < 0 or states.max() > QUERY):
        raise ValueError(f"puzzle cells must be in 0..{QUERY}, got range [{states.min()}, {states.max()}]")
    features = (states[..., None] == np.arange(1, QUERY + 1)).astype(np.float32)
    return features, np.arange(SIZE * SIZE, dtype=np.int32)
