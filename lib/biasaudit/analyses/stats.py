"""Statistics core: sign-flip permutation tests, false-discovery control, cluster bootstrap,
intervals, the noise-only yardstick and carry-over (the definitions are in docs/design.md, "Definitions").

Conventions used throughout:

- A "difference" is one paired per-item change; its sign convention is the caller's (a drop is
  English minus language, so positive means lower in the language). Every test here is
  two-sided, so the p-values do not depend on that choice.
- Randomness always comes from an explicit seed or `np.random.Generator`; nothing is kept at
  module level, so a result depends only on the arguments.
- Missing values (NaN) are dropped where a function says so and rejected elsewhere, never
  silently propagated into a p-value.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

# Upper bound on the number of matrix elements built at once (sign or index matrices):
# 2**22 float64 values is 32 MiB, small enough for a laptop and large enough for BLAS.
_CHUNK_ELEMENTS: int = 1 << 22
# Exact enumeration beyond this many items would mean more than 2**26 sign vectors.
_MAX_EXACT: int = 26


# --------------------------------------------------------------------------------------------
# Sign-flip permutation test
# --------------------------------------------------------------------------------------------


def _as_differences(differences: Any) -> np.ndarray:
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1:
        raise ValueError(f"differences must be one-dimensional, got shape {d.shape}")
    if np.isnan(d).any():
        raise ValueError(
            f"differences contain {int(np.isnan(d).sum())} NaN value(s); drop them first "
            "(sign_flip_tests does this per group)"
        )
    if not np.isfinite(d).all():
        raise ValueError("differences contain infinite values; a permutation test needs finite ones")
    return d


def _count_exact(d: np.ndarray, threshold: float) -> int:
    """How many of the 2**n sign vectors give |sum(s * d)| >= threshold (enumerated in chunks)."""
    n = d.size
    total = 1 << n
    # sum(s * d) with s = 1 - 2 * bit equals sum(d) - 2 * (bits @ d).
    d_sum = d.sum()
    shifts = np.arange(n, dtype=np.int64)
    rows = max(1, _CHUNK_ELEMENTS // max(n, 1))
    count = 0
    for start in range(0, total, rows):
        codes = np.arange(start, min(start + rows, total), dtype=np.int64)
        bits = ((codes[:, None] >> shifts) & 1).astype(np.float64)
        sums = d_sum - 2.0 * (bits @ d)
        count += int(np.count_nonzero(np.abs(sums) >= threshold))
    return count


def _random_sign_chunks(rng: np.random.Generator, n_draws: int, n: int) -> Iterator[np.ndarray]:
    """Yield 0/1 float matrices (rows = draws, columns = items); 1 means that item's sign flips.

    Bits come from random bytes unpacked eight at a time: every bit is a fair, independent coin,
    and drawing bytes is eight times cheaper than drawing one integer per sign.
    """
    n_bytes = (n + 7) // 8
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_draws, rows):
        k = min(rows, n_draws - start)
        raw = np.frombuffer(rng.bytes(k * n_bytes), dtype=np.uint8).reshape(k, n_bytes)
        yield np.unpackbits(raw, axis=1, count=n).astype(np.float64)


def sign_flip_pvalue(
    differences: np.ndarray,
    *,
    n_permutations: int = 10_000,
    rng: np.random.Generator,
    exact_below: int = 16,
) -> float:
    """Two-sided paired sign-flip permutation p-value for mean(differences) == 0.

    Under the null each per-item difference is symmetric about zero, so flipping its sign is
    as likely as not. For n <= `exact_below` all 2**n sign vectors are enumerated and p is the
    share whose |mean| reaches the observed |mean| (the identity included, so p >= 2 / 2**n).
    Otherwise `n_permutations` random sign vectors are drawn and p = (1 + count) / (1 +
    n_permutations), which never reports 0 and keeps the test valid. Ties are judged with an
    absolute tolerance of 1e-9 * max|d| on the mean, so rounding never breaks an exact tie.
    The differences are sorted first: the null treats items as exchangeable, and sorting makes
    the Monte Carlo p depend on the values and `rng` only, not on the order of the rows.

    Returns nan for no differences and 1.0 when all differences are zero.
    """
    d = _as_differences(differences)
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    if exact_below > _MAX_EXACT:
        raise ValueError(
            f"exact_below={exact_below} would enumerate up to 2**{exact_below} sign vectors; "
            f"use at most {_MAX_EXACT} and let larger samples use Monte Carlo draws"
        )
    n = d.size
    if n == 0:
        return float("nan")
    d = np.sort(d)
    scale = float(np.max(np.abs(d)))
    if scale == 0.0:
        return 1.0
    # Compare sums rather than means: the tolerance 1e-9 * max|d| on the mean is n times that on the sum.
    threshold = abs(float(d.sum())) - 1e-9 * scale * n
    if n <= exact_below:
        return _count_exact(d, threshold) / float(1 << n)
    d_sum = d.sum()
    count = 0
    for bits in _random_sign_chunks(rng, n_permutations, n):
        sums = d_sum - 2.0 * (bits @ d)
        count += int(np.count_nonzero(np.abs(sums) >= threshold))
    return (1.0 + count) / (1.0 + n_permutations)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds, so a group key's repr is the same however the
    column was stored (np.int64(3) and 3 both become 3)."""
    return value.item() if isinstance(value, np.generic) else value


def group_seed_key(key: tuple[Any, ...]) -> int:
    """Stable 32-bit key of a group's values: CRC-32 of the repr of the tuple of plain values.

    Used with the run seed to seed each group's generator, so a group's p-value does not depend
    on group order or on which other groups are in the table.
    """
    return zlib.crc32(repr(tuple(_plain(v) for v in key)).encode("utf-8"))


def sign_flip_tests(
    table: pd.DataFrame,
    *,
    by: list[str],
    value: str,
    n_permutations: int = 10_000,
    seed: int,
    exact_below: int = 16,
) -> pd.DataFrame:
    """One sign-flip test per group of `by` on the paired differences in column `value`.

    Returns one row per group (sorted by the group values) with the `by` columns and `n`
    (differences tested, NaN dropped), `mean` (their mean) and `p` (two-sided; nan when n == 0).
    Each group draws from `np.random.default_rng([seed, group_seed_key(key)])`, so rerunning
    one cell alone, or in another order, gives the same p. No correction for multiple
    testing is applied here: pass the result to `add_bh`.
    """
    if isinstance(by, str):
        by = [by]
    missing = [c for c in [*by, value] if c not in table.columns]
    if missing:
        raise KeyError(f"sign_flip_tests: column(s) {missing} not in the table; it has {list(table.columns)}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    records: list[tuple[Any, ...]] = []
    if len(table):
        grouped = table.groupby(by, sort=True, dropna=False, observed=True)[value]
        for key, series in grouped:
            key = key if isinstance(key, tuple) else (key,)
            try:
                d = series.to_numpy(dtype=float, na_value=np.nan)
            except (TypeError, ValueError) as err:
                raise ValueError(f"sign_flip_tests: column {value!r} of group {key} is not numeric: {err}") from err
            d = d[~np.isnan(d)]
            rng = np.random.default_rng([seed, group_seed_key(key)])
            p = sign_flip_pvalue(d, n_permutations=n_permutations, rng=rng, exact_below=exact_below)
            mean = float(d.mean()) if d.size else float("nan")
            records.append((*(_plain(v) for v in key), d.size, mean, p))
    out = pd.DataFrame.from_records(records, columns=[*by, "n", "mean", "p"])
    return out.astype({"n": "int64", "mean": "float64", "p": "float64"})


# --------------------------------------------------------------------------------------------
# False-discovery control
# --------------------------------------------------------------------------------------------


def benjamini_hochberg(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg q-values (adjusted p-values), same shape as the input.

    The family is every non-missing p given: a NaN p (a cell that could not be tested) stays
    NaN and does not count towards the family size.
    """
    p = np.asarray(pvalues, dtype=float)
    flat = p.ravel()
    known = ~np.isnan(flat)
    if ((flat[known] < 0) | (flat[known] > 1)).any():
        bad = flat[known][(flat[known] < 0) | (flat[known] > 1)]
        raise ValueError(f"p-values must lie in [0, 1]; got {bad[:5].tolist()}")
    q = np.full(flat.shape, np.nan)
    if known.any():
        q[known] = sps.false_discovery_control(flat[known], method="bh")
    return q.reshape(p.shape)


def add_bh(
    table: pd.DataFrame,
    p_col: str = "p",
    q_col: str = "q",
    alpha: float = 0.05,
    reliable_col: str = "reliable",
) -> pd.DataFrame:
    """A copy of `table` with BH q-values and `reliable` = q < alpha, the family being all rows.

    To correct within subfamilies (e.g. per model), call this per group. A row whose p is NaN
    gets q NaN and reliable False.
    """
    if p_col not in table.columns:
        raise KeyError(f"add_bh: column {p_col!r} not in the table; it has {list(table.columns)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    out = table.copy()
    q = benjamini_hochberg(out[p_col].to_numpy(dtype=float, na_value=np.nan))
    out[q_col] = q
    out[reliable_col] = np.where(np.isnan(q), False, q < alpha)
    return out


# --------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")


def _bootstrap_index_chunks(rng: np.random.Generator, n_clusters: int, n_boot: int) -> Iterator[np.ndarray]:
    """Yield matrices of drawn cluster positions (rows = replicates, each of length n_clusters).

    Shared by both bootstrap paths so that, with the same seed, they draw the same clusters.
    """
    rows = max(1, _CHUNK_ELEMENTS // n_clusters)
    for start in range(0, n_boot, rows):
        yield rng.integers(0, n_clusters, size=(min(rows, n_boot - start), n_clusters))


def _percentile_interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def cluster_bootstrap(
    table: pd.DataFrame,
    *,
    cluster: str,
    statistic: Callable[[pd.DataFrame], float],
    n_boot: int = 5_000,
    seed: int,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """(estimate, low, high): `statistic` on the table and its percentile bootstrap interval.

    Clusters (base items) are resampled with replacement and all rows of a drawn cluster move
    together, so every version of an item stays with its English original. In each resampled
    table the `cluster` column holds the draw number (0 .. n_clusters - 1) instead of the
    original id: a cluster drawn twice counts as two items, so a statistic that pairs rows by
    cluster still pairs them correctly. The index is reset. Replicates where the statistic is
    NaN are left out of the interval. For the mean of one value per cluster use the much
    faster `bootstrap_mean_ci`.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if cluster not in table.columns:
        raise KeyError(f"cluster_bootstrap: column {cluster!r} not in the table; it has {list(table.columns)}")
    codes, _ = pd.factorize(table[cluster], use_na_sentinel=True)
    if (codes < 0).any():
        raise ValueError(
            f"cluster_bootstrap: {int((codes < 0).sum())} row(s) have no {cluster!r} value; "
            "every row must belong to a cluster"
        )
    n_clusters = int(codes.max()) + 1 if codes.size else 0
    if n_clusters == 0:
        return float("nan"), float("nan"), float("nan")
    estimate = float(statistic(table))
    order = np.argsort(codes, kind="stable")  # row positions grouped by cluster
    sizes = np.bincount(codes, minlength=n_clusters)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    base = table.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    replicates = np.empty(n_boot)
    r = 0
    for chunk in _bootstrap_index_chunks(rng, n_clusters, n_boot):
        for drawn in chunk:
            drawn_sizes = sizes[drawn]
            offsets = np.cumsum(drawn_sizes) - drawn_sizes
            within = np.arange(drawn_sizes.sum()) - np.repeat(offsets, drawn_sizes)
            rows = order[np.repeat(starts[drawn], drawn_sizes) + within]
            sample = base.take(rows).reset_index(drop=True)
            sample[cluster] = np.repeat(np.arange(n_clusters), drawn_sizes)
            replicates[r] = statistic(sample)
            r += 1
    low, high = _percentile_interval(replicates, level)
    return estimate, low, high


def bootstrap_mean_ci(
    values_by_cluster: np.ndarray,
    *,
    n_boot: int = 5_000,
    seed: int,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """(mean, low, high) for the mean of one value per cluster, with a percentile bootstrap.

    The fast path of `cluster_bootstrap`: reduce each cluster to one value first (e.g. the
    item's drop), then resample those values (one index matrix and one take per chunk). With
    the same seed it draws the same clusters as `cluster_bootstrap`. NaN values are dropped.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    values = np.asarray(values_by_cluster, dtype=float).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    replicates = np.concatenate(
        [values.take(idx).mean(axis=1) for idx in _bootstrap_index_chunks(rng, values.size, n_boot)]
    )
    low, high = _percentile_interval(replicates, level)
    return float(values.mean()), low, high


# --------------------------------------------------------------------------------------------
# Intervals and yardsticks
# --------------------------------------------------------------------------------------------


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) with a Student-t interval (df = n - 1), NaN dropped.

    Used across models, where the models are the units. n < 2 gives (mean, nan, nan); values
    that are all equal give a zero-width interval.
    """
    _check_level(level)
    x = np.asarray(values, dtype=float).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(x.mean())
    if x.size < 2:
        return mean, float("nan"), float("nan")
    sem = float(x.std(ddof=1)) / np.sqrt(x.size)
    if sem == 0.0:
        return mean, mean, mean
    low, high = sps.t.interval(level, df=x.size - 1, loc=mean, scale=sem)
    return mean, float(low), float(high)


def noise_only(differences: Sequence[float] | np.ndarray) -> float:
    """Expected |mean| of the per-item changes if they were pure noise: s * sqrt(2/pi) / sqrt(n).

    s is the sample SD (ddof=1) of the changes; for normal noise with SD s the mean of n
    changes is N(0, s**2 / n), whose expected absolute value this is. An observed |mean| near
    this value is what scatter alone produces. NaN dropped; n < 2 gives nan.
    """
    d = np.asarray(differences, dtype=float).ravel()
    d = d[~np.isnan(d)]
    if d.size < 2:
        return float("nan")
    return float(d.std(ddof=1) * np.sqrt(2.0 / np.pi) / np.sqrt(d.size))


def carry_over(before: Sequence[float] | np.ndarray, after: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """How much of an item's score survives a change (rewording or translation).

    Returns slope (least-squares slope of `after` on `before`; 1 = fully kept, 0 = nothing
    kept), r (Pearson correlation), sd_ratio (sd(after) / sd(before)) and n (pairs used);
    slope == r * sd_ratio, which separates lost ranking (r) from squeezed spread (sd_ratio).
    Pairs with a NaN on either side are dropped; fewer than 2 pairs or no spread gives nan.
    """
    x = np.asarray(before, dtype=float).ravel()
    y = np.asarray(after, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"before and after must pair up item by item; got {x.size} and {y.size} values")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    nan = float("nan")
    result = {"slope": nan, "r": nan, "sd_ratio": nan, "n": int(x.size)}
    if x.size < 2:
        return result
    sd_before = float(x.std(ddof=1))
    sd_after = float(y.std(ddof=1))
    if sd_before == 0.0:
        return result
    result["sd_ratio"] = sd_after / sd_before
    if sd_after == 0.0:
        # A constant `after` keeps nothing of `before`: slope 0; r is undefined.
        result["slope"] = 0.0
        return result
    fit = sps.linregress(x, y)
    result["slope"] = float(fit.slope)
    result["r"] = float(fit.rvalue)
    return result


# --------------------------------------------------------------------------------------------
# Vectorized paths for the chapters: many columns and shifts against one sign matrix, and the
# cluster bootstrap of statistics that depend on the data only through per-cluster sums
# --------------------------------------------------------------------------------------------


def _all_sign_chunks(n: int) -> Iterator[np.ndarray]:
    """Yield every 0/1 flip pattern of n items (2**n rows in all), in chunks."""
    total = 1 << n
    shifts = np.arange(n, dtype=np.int64)
    rows = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, total, rows):
        codes = np.arange(start, min(start + rows, total), dtype=np.int64)
        yield ((codes[:, None] >> shifts) & 1).astype(np.float64)


def sign_flip_pvalues_shifted(
    differences: np.ndarray,
    shifts: Sequence[float] | np.ndarray,
    *,
    n_permutations: int = 10_000,
    rng: np.random.Generator,
    exact_below: int = 16,
) -> np.ndarray:
    """Sign-flip p-values of mean(d[:, r] - shift_g) == 0 for every column r and shift g at once.

    `differences` is an (n items × R columns) matrix (a 1-D array is one column); the result is
    (R × G). Every column and shift is tested against the *same* random sign vectors (or, for
    n <= `exact_below`, all 2**n of them), which is what makes this fast: with a sign vector s
    and column d, sum(s * (d - shift)) = s·d - shift * sum(s), so one matrix product serves every
    shift. It is the test of `sign_flip_pvalue` (the same Monte Carlo formula (1 + count) /
    (1 + B), the same tie tolerance); with the same generator, a sorted column and shift 0 it
    gives the very same p (sign_flip_pvalue sorts its input, this function takes the rows in the
    order given). Columns share their
    Monte Carlo error (they see the same draws), which is harmless for averages over columns such
    as a detection rate. NaN is not allowed: give complete columns.
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    if d.ndim != 2:
        raise ValueError(f"differences must be (items × columns), got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("differences must be finite (drop NaN rows first)")
    shift = np.asarray(shifts, dtype=float).ravel()
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    if exact_below > _MAX_EXACT:
        raise ValueError(f"exact_below={exact_below} is above the limit {_MAX_EXACT}")
    n, n_cols = d.shape
    if n == 0:
        return np.full((n_cols, shift.size), np.nan)
    # Observed sums and the tie tolerance of sign_flip_pvalue, per column and shift.
    observed = d.sum(axis=0)[:, None] - n * shift[None, :]
    scale = np.abs(d[:, :, None] - shift[None, None, :]).max(axis=0)
    threshold = np.abs(observed) - 1e-9 * scale * n
    counts = np.zeros((n_cols, shift.size), dtype=np.int64)
    exact = n <= exact_below
    chunks = _all_sign_chunks(n) if exact else _random_sign_chunks(rng, n_permutations, n)
    column_sums = d.sum(axis=0)
    for bits in chunks:
        # s = 1 - 2 * bits: s·d = sum(d) - 2 bits·d, and sum(s) = n - 2 * sum(bits).
        products = column_sums[None, :] - 2.0 * (bits @ d)  # (rows × R)
        sign_sums = n - 2.0 * bits.sum(axis=1)  # (rows,)
        for g, value in enumerate(shift):
            null = np.abs(products - value * sign_sums[:, None])
            counts[:, g] += np.count_nonzero(null >= threshold[None, :, g], axis=0)
    if exact:
        p = counts / float(1 << n)
    else:
        p = (1.0 + counts) / (1.0 + n_permutations)
    # All-zero columns (no shift) are never extreme: p = 1, as in sign_flip_pvalue.
    return np.where(scale == 0.0, 1.0, p)


def bootstrap_counts(rng: np.random.Generator, n_clusters: int, n_boot: int) -> Iterator[np.ndarray]:
    """Yield (replicates × clusters) matrices of how often each cluster was drawn.

    The draws are those of `bootstrap_mean_ci` and `cluster_bootstrap` with the same generator,
    so the three bootstraps agree replicate by replicate.
    """
    for idx in _bootstrap_index_chunks(rng, n_clusters, n_boot):
        rows = idx.shape[0]
        flat = (idx + n_clusters * np.arange(rows)[:, None]).ravel()
        yield np.bincount(flat, minlength=rows * n_clusters).reshape(rows, n_clusters).astype(np.float64)


def bootstrap_sums(
    sums_by_cluster: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_boot: int = 5_000,
    seed: Any,
    level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high) of a statistic computed from per-cluster sums, by cluster bootstrap.

    Many statistics of the book depend on the rows only through sums over base items: a mean is
    sum / count, a least-squares slope and a correlation come from the sums of x, y, x², y², xy
    and the count. Give those sums per cluster (`sums_by_cluster`, clusters × k) and a
    `statistic` mapping a (replicates × k) matrix of totals to (replicates,) or (replicates × m)
    values; each replicate's totals are then one matrix product of the draw counts with the
    cluster sums, so thousands of replicates take milliseconds. A cluster with no rows for some
    quantity simply contributes zero sums (e.g. an item missing in one language). Replicates with
    a NaN value are left out of that value's percentile interval. `seed` is anything
    `np.random.default_rng` accepts.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    sums = np.asarray(sums_by_cluster, dtype=float)
    if sums.ndim != 2:
        raise ValueError(f"sums_by_cluster must be (clusters × quantities), got shape {sums.shape}")
    estimate = np.asarray(statistic(sums.sum(axis=0)[None, :]), dtype=float)[0]
    n_clusters = sums.shape[0]
    if n_clusters == 0:
        nan = np.full(np.shape(estimate), np.nan)
        return estimate, nan, nan
    rng = np.random.default_rng(seed)
    replicates = np.concatenate(
        [np.asarray(statistic(counts @ sums), dtype=float).reshape(counts.shape[0], -1)
         for counts in bootstrap_counts(rng, n_clusters, n_boot)]
    )
    tail = (1.0 - level) / 2.0
    low = np.full(replicates.shape[1], np.nan)
    high = np.full(replicates.shape[1], np.nan)
    for j in range(replicates.shape[1]):
        finite = replicates[:, j][np.isfinite(replicates[:, j])]
        if finite.size:
            low[j], high[j] = np.quantile(finite, [tail, 1.0 - tail])
    shape = np.shape(estimate)
    return estimate, low.reshape(shape), high.reshape(shape)


# Column order of the sums `carry_over_sums` builds and `carry_over_from_sums` reads.
CARRY_OVER_SUMS: tuple[str, ...] = ("n", "x", "y", "xx", "yy", "xy")


def carry_over_sums(before: np.ndarray, after: np.ndarray, cluster_codes: np.ndarray, n_clusters: int,
                    center: tuple[float, float] | None = None) -> np.ndarray:
    """Per-cluster sums (n, x, y, x², y², xy) of before/after pairs, for `bootstrap_sums`.

    Values are centred first (on `center`, default the overall means) so that the variances
    computed from the sums do not lose precision.
    """
    x = np.asarray(before, dtype=float)
    y = np.asarray(after, dtype=float)
    cx, cy = center if center is not None else (float(x.mean()) if x.size else 0.0, float(y.mean()) if y.size else 0.0)
    x, y = x - cx, y - cy
    columns = [np.ones_like(x), x, y, x * x, y * y, x * y]
    return np.column_stack([np.bincount(cluster_codes, weights=c, minlength=n_clusters) for c in columns])


def carry_over_from_sums(totals: np.ndarray) -> np.ndarray:
    """(rows × 3) slope, r, sd_ratio from (rows × 6) totals in CARRY_OVER_SUMS order.

    Same definitions as `carry_over`: slope = r × sd_ratio; nan with fewer than 2 pairs or no
    spread in `before`; slope 0 and r nan when `after` has no spread.
    """
    t = np.atleast_2d(np.asarray(totals, dtype=float))
    n, sx, sy, sxx, syy, sxy = (t[:, k] for k in range(6))
    with np.errstate(invalid="ignore", divide="ignore"):
        vx = sxx - sx * sx / n
        vy = syy - sy * sy / n
        cov = sxy - sx * sy / n
        # Sums of squares that are zero up to rounding count as no spread.
        vx = np.where(vx <= 1e-12 * np.maximum(sxx, 1e-300), 0.0, vx)
        vy = np.where(vy <= 1e-12 * np.maximum(syy, 1e-300), 0.0, vy)
        slope = np.where(vx > 0, cov / vx, np.nan)
        r = np.where((vx > 0) & (vy > 0), cov / np.sqrt(vx * vy), np.nan)
        sd_ratio = np.where(vx > 0, np.sqrt(vy / vx), np.nan)
    slope = np.where((vx > 0) & (vy == 0), 0.0, slope)
    few = n < 2
    out = np.column_stack([slope, r, sd_ratio])
    out[few] = np.nan
    return out
