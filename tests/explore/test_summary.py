"""Array summaries against NumPy computed directly (np.histogram for the bins)."""

import numpy as np
import pytest

from tinytensor.explore.summary import HISTOGRAM_BINS, brief, summarize


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 4, 5)])
def test_statistics_and_histogram_match_numpy(shape):
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    s = summarize(a)
    x = a.astype(np.float64)
    for key, expected in [("min", x.min()), ("max", x.max()), ("mean", x.mean()),
                          ("std", x.std()), ("norm", np.linalg.norm(x))]:  # fmt: skip
        assert s[key] == pytest.approx(expected, rel=1e-5, abs=1e-12), key
    if a.size > 1:
        expected_counts = np.histogram(x, bins=HISTOGRAM_BINS)[0].tolist()
        assert s["hist"]["counts"] == expected_counts
    assert sum(s["hist"]["counts"]) == a.size and s["nan"] == s["inf"] == 0


def test_nan_and_inf_are_counted_and_left_out_of_the_statistics():
    a = np.array([1.0, np.nan, 3.0, np.inf, -np.inf, np.nan])
    s = summarize(a)
    assert (s["nan"], s["inf"], s["size"]) == (2, 2, 6)
    assert (s["min"], s["max"], s["mean"]) == (1.0, 3.0, 2.0)
    assert sum(s["hist"]["counts"]) == 2


def test_nothing_finite_and_constant_and_boolean_arrays():
    assert summarize(np.array([np.nan]))["hist"] is None
    assert summarize(np.full((2, 2), 7.0))["hist"] == {"lo": 7.0, "hi": 7.0, "counts": [4]}
    assert summarize(np.array([True, False, True]))["mean"] == pytest.approx(2 / 3, rel=1e-5)
    assert set(brief(np.ones(4))) == {"norm", "min", "max", "mean", "nan", "inf"}
    assert brief(np.ones(4))["norm"] == 2.0
