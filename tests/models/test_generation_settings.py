"""Sampling settings: temperature 0 is greedy decoding; a setting no sampler can use (NaN or
negative temperature, top_k/top_p out of range, ...) is an error naming it, raised before the
model runs."""

import math

import numpy as np
import pytest
from tinytensor.models.generation import (
    generate_decoder_only,
    generate_encoder_decoder,
    next_tokens,
)

import tinytensor as tt


class NeverRun:
    """A model that fails the test if generation reaches it."""

    config = None

    def __call__(self, *args, **kwargs):
        raise AssertionError("the model ran before the settings were checked")

    encode = decode = __call__

    def parameters(self):
        raise AssertionError("the model was touched before the settings were checked")


BAD = [
    ({"temperature": math.nan}, ValueError, "generate: temperature must be a finite number >= 0"),
    ({"temperature": -0.5}, ValueError, "generate: temperature must be a finite number >= 0"),
    ({"temperature": math.inf}, ValueError, "generate: temperature must be a finite number >= 0"),
    ({"temperature": "0.7"}, TypeError, "generate: temperature must be a number, got '0.7'"),
    ({"temperature": None}, TypeError, "generate: temperature must be a number, got None"),
    ({"top_k": 0}, ValueError, "generate: top_k must be a positive int or None, got 0"),
    ({"top_k": -3}, ValueError, "generate: top_k must be a positive int or None, got -3"),
    ({"top_k": 2.5}, ValueError, "generate: top_k must be a positive int or None, got 2.5"),
    ({"top_k": True}, ValueError, "generate: top_k must be a positive int or None, got True"),
    ({"top_p": 0.0}, ValueError, r"generate: top_p must be in \(0, 1\] or None, got 0.0"),
    ({"top_p": 1.5}, ValueError, r"generate: top_p must be in \(0, 1\] or None, got 1.5"),
    ({"top_p": math.nan}, ValueError, r"generate: top_p must be in \(0, 1\] or None, got nan"),
    ({"max_new_tokens": -1}, ValueError, "generate: max_new_tokens must be an int >= 0, got -1"),
    ({"max_new_tokens": 2.0}, ValueError, "generate: max_new_tokens must be an int >= 0, got 2.0"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD, ids=[str(b[0]) for b in BAD])
@pytest.mark.parametrize("loop", [generate_decoder_only, generate_encoder_decoder])
def test_a_bad_setting_is_an_error_before_the_model_runs(loop, kwargs, error, message):
    settings = {"max_new_tokens": 4, "do_sample": True, **kwargs}
    with pytest.raises(error, match=message):
        loop(NeverRun(), np.array([[1, 2, 3]]), **settings)


@pytest.mark.parametrize("num_beams", [0, -1, 1.5])
def test_a_bad_beam_count_is_an_error(num_beams):
    with pytest.raises(ValueError, match="generate: num_beams must be a positive int"):
        generate_encoder_decoder(NeverRun(), np.array([[1, 2]]), 4, num_beams=num_beams)


def test_next_tokens_rejects_nan_temperature_even_when_greedy():
    with pytest.raises(ValueError, match="next_tokens: temperature"):
        next_tokens(np.zeros((1, 5)), do_sample=False, temperature=math.nan)


def test_temperature_0_is_argmax_whatever_the_generator():
    logits = np.random.default_rng(0).normal(size=(6, 40)) * 3
    for seed in range(5):
        chosen = next_tokens(logits, do_sample=True, temperature=0.0, generator=tt.Generator(seed))
        np.testing.assert_array_equal(chosen, logits.argmax(-1))
    # numpy numbers work as Python numbers do
    chosen = next_tokens(logits, do_sample=True, temperature=np.float32(0), top_k=np.int64(3))
    np.testing.assert_array_equal(chosen, logits.argmax(-1))


def test_gpt_sampling_at_temperature_0_is_its_greedy_decoding():
    from tinytensor.models.gpt import GPT, GPTConfig

    tt.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=17, block_size=16, n_layer=1, n_head=2, n_embd=8))
    model.eval()  # no dropout: the same logits every call
    prompt = tt.tensor(np.array([[3, 1, 4], [1, 5, 9]]))
    greedy = model.generate(prompt, max_new_tokens=6).numpy()
    for seed in (0, 1):
        cold = model.generate(
            prompt, max_new_tokens=6, do_sample=True, temperature=0, generator=tt.Generator(seed)
        ).numpy()
        np.testing.assert_array_equal(cold, greedy)
    hot = model.generate(
        prompt, max_new_tokens=6, do_sample=True, temperature=50.0, generator=tt.Generator(1)
    ).numpy()
    assert not np.array_equal(hot, greedy)  # at a high temperature it does sample
