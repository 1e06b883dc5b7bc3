"""Summaries of arrays for the explorer: a few statistics and a histogram, never the values.

A 48-layer GPT has thousands of tensors; the page stays small because each one is described by
about twenty numbers: min, max, mean, std (over the finite entries), the NaN and inf counts, and
a histogram of the finite values.
"""

from __future__ import annotations

import numpy as np

HISTOGRAM_BINS = 24
_DIGITS = 6  # significant digits kept in the page: enough to compare, small to store


def to_numpy(array) -> np.ndarray:
    """A NumPy copy of a NumPy or CuPy array (CuPy's `.get()` copies to the host)."""
    if isinstance(array, np.ndarray):
        return array
    get = getattr(array, "get", None)
    return get() if callable(get) else np.asarray(array)


def rounded(x: float) -> float | None:
    """`x` to `_DIGITS` significant digits; None for NaN/inf, which JSON cannot hold."""
    x = float(x)
    if not np.isfinite(x):
        return None
    return float(f"{x:.{_DIGITS}g}")


def summarize(array, histogram: bool = True) -> dict:
    """Statistics and histogram of `array` (any shape, any dtype).

    Returns a dict with `min`, `max`, `mean`, `std` of the finite entries (population std, as
    NumPy's default), `nan` and `inf` counts, `size`, `norm` (the L2 norm of the finite entries)
    and `hist`: {"lo", "hi", "counts"} over the finite range (None when nothing is finite).
    Booleans count as 0/1.
    """
    a = to_numpy(array)
    if a.dtype == np.bool_:
        a = a.astype(np.int8)
    a = a.astype(np.float64, copy=False).reshape(-1)
    finite_mask = np.isfinite(a)
    finite_count = int(np.count_nonzero(finite_mask))
    nan = int(np.count_nonzero(np.isnan(a))) if finite_count < a.size else 0
    out = {"size": int(a.size), "nan": nan, "inf": int(a.size - finite_count - nan)}
    finite = a if finite_count == a.size else a[finite_mask]
    if finite.size == 0:
        out.update(min=None, max=None, mean=None, std=None, norm=None, hist=None)
        return out
    lo, hi = float(finite.min()), float(finite.max())
    mean = float(finite.mean())
    sum_sq = float(np.dot(finite, finite))
    centered = finite - mean
    out.update(
        min=rounded(lo),
        max=rounded(hi),
        mean=rounded(mean),
        std=rounded(np.sqrt(np.dot(centered, centered) / finite.size)),
        norm=rounded(np.sqrt(sum_sq)),
    )
    if histogram:
        out["hist"] = {"lo": rounded(lo), "hi": rounded(hi), "counts": _histogram(finite, lo, hi)}
    return out


def _histogram(finite, lo, hi):
    """Counts in HISTOGRAM_BINS equal bins over [lo, hi] (the last one closed, as NumPy's);
    a bincount, several times faster than np.histogram on the many small arrays of a model."""
    if lo == hi:  # one value: one full bin, drawn as a single bar
        return [int(finite.size)]
    scaled = (finite - lo) * (HISTOGRAM_BINS / (hi - lo))
    bins = np.minimum(scaled.astype(np.int64), HISTOGRAM_BINS - 1)
    return np.bincount(bins, minlength=HISTOGRAM_BINS).tolist()


def brief(array) -> dict:
    """The few numbers a backward step shows for one gradient: norm, min, max, mean."""
    s = summarize(array, histogram=False)
    return {key: s[key] for key in ("norm", "min", "max", "mean", "nan", "inf")}
