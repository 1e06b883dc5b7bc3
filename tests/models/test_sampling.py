"""Next-token choice: greedy, temperature, top-k and top-p, against HF's logits processors."""

import numpy as np
import pytest
from tinytensor.models.generation import next_tokens, top_k_filter, top_p_filter


def _logits(seed=0, shape=(4, 50)):
    return np.random.default_rng(seed).normal(size=shape) * 2


def test_greedy_is_argmax():
    logits = _logits()
    np.testing.assert_array_equal(next_tokens(logits), logits.argmax(-1))


def test_top_k_and_top_p_match_hf_warpers(transformers, torch):
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    logits = _logits(1)
    theirs_k = TopKLogitsWarper(top_k=7)(None, torch.tensor(logits)).numpy()
    np.testing.assert_array_equal(np.isfinite(top_k_filter(logits, 7)), np.isfinite(theirs_k))
    for p in (0.05, 0.5, 0.9):
        theirs_p = TopPLogitsWarper(top_p=p)(None, torch.tensor(logits)).numpy()
        np.testing.assert_array_equal(np.isfinite(top_p_filter(logits, p)), np.isfinite(theirs_p))


def test_sampling_frequencies_follow_the_tempered_softmax():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    rng = np.random.default_rng(0)
    n = 20000
    draws = np.concatenate(
        [next_tokens(logits, do_sample=True, temperature=2.0, generator=rng) for _ in range(n)]
    )
    expected = np.sqrt([0.5, 0.3, 0.15, 0.05])
    expected /= expected.sum()
    freq = np.bincount(draws, minlength=4) / n
    np.testing.assert_allclose(freq, expected, atol=0.015)


def test_top_k_and_top_p_sampling_stay_in_the_kept_set():
    logits = _logits(2, (3, 30))
    rng = np.random.default_rng(0)
    kept_k = np.isfinite(top_k_filter(logits, 3))
    kept_p = np.isfinite(top_p_filter(logits, 0.6))
    for _ in range(300):
        t = next_tokens(logits, do_sample=True, top_k=3, generator=rng)
        assert kept_k[np.arange(3), t].all()
        t = next_tokens(logits, do_sample=True, top_p=0.6, generator=rng)
        assert kept_p[np.arange(3), t].all()


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="temperature"):
        next_tokens(_logits(), do_sample=True, temperature=-0.5)  # 0 is greedy decoding
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(_logits(), 1.5)
