"""The training infrastructure of the examples, on a tiny stand-in model: data pipeline, loss
going down, exact resume from a checkpoint, Ctrl-C leaving a valid checkpoint."""

import os

import numpy as np
import pytest
from stand_in import TinyCharLM, lm_loss
from training.checkpoint import load_checkpoint
from training.data import CharTokenizer, RandomWindows, fixed_windows, load_text, split_train_val
from training.optimization import make_adamw, warmup_cosine, warmup_cosine_factor
from training.trainer import TrainConfig, Trainer

import tinytensor as tt

TEXT = "the quick brown fox jumps over the lazy dog. " * 40


# ---- data ---------------------------------------------------------------------------------------


def test_tokenizer_has_sorted_vocabulary_and_round_trips():
    tok = CharTokenizer.from_text("banana!")
    assert tok.chars == "!abn"
    assert tok.encode("nab").tolist() == [3, 1, 2]
    assert tok.decode(tok.encode("banana")) == "banana"
    with pytest.raises(ValueError, match="'z' is not in the vocabulary"):
        tok.encode("zebra")


def test_tokenizer_specials_come_after_the_characters_and_decode_to_nothing():
    tok = CharTokenizer.from_text("ab", specials=("[MASK]", "[SEP]"))
    assert tok.vocab_size == 4 and tok.special_ids == {"[MASK]": 2, "[SEP]": 3}
    assert tok.decode([0, 2, 1, 3]) == "ab"
    again = CharTokenizer.from_state_dict(tok.state_dict())
    assert again.itos == tok.itos


def test_default_corpus_is_the_pydoc_topics_text():
    from pydoc_data import topics

    text = load_text(None)
    assert text == "".join(topics.topics.values())
    assert len(text) > 100_000 and 50 < len(set(text)) < 200


def test_load_text_names_a_missing_file(tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_text(missing)


def test_split_keeps_a_contiguous_tail_for_validation():
    train, val = split_train_val(np.arange(100), val_fraction=0.1)
    assert train.tolist() == list(range(90)) and val.tolist() == list(range(90, 100))
    with pytest.raises(ValueError):
        split_train_val(np.arange(100), val_fraction=1.5)


def test_random_windows_are_slices_with_targets_shifted_by_one():
    ids = np.arange(1000)
    batches = RandomWindows(ids, block_size=8, batch_size=5, seed=3)
    x, y = batches.next_batch()
    assert x.shape == y.shape == (5, 8)
    np.testing.assert_array_equal(y, x + 1)  # ids = arange: the next token is id + 1
    np.testing.assert_array_equal(np.diff(x, axis=1), 1)  # each row is a contiguous window


def test_random_windows_state_replays_the_same_batches():
    batches = RandomWindows(np.arange(1000), block_size=4, batch_size=3, seed=0)
    batches.next_batch()
    state = batches.state_dict()
    first = [batches.next_batch()[0] for _ in range(3)]
    batches.load_state_dict(state)
    again = [batches.next_batch()[0] for _ in range(3)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_fixed_windows_cover_the_stream_evenly():
    x, y = fixed_windows(np.arange(101), block_size=10, max_windows=100)
    assert x.shape == (10, 10)
    assert x[0, 0] == 0 and y[-1, -1] == 100  # from the first token to the last
    np.testing.assert_array_equal(y, x + 1)


def test_warmup_cosine_factor_endpoints():
    assert warmup_cosine_factor(0, 10, 110, 0.1) == pytest.approx(0.1)
    assert warmup_cosine_factor(9, 10, 110, 0.1) == pytest.approx(1.0)
    assert warmup_cosine_factor(60, 10, 110, 0.1) == pytest.approx(0.55)  # halfway: (1+0.1)/2
    assert warmup_cosine_factor(110, 10, 110, 0.1) == pytest.approx(0.1)


# ---- the loop -----------------------------------------------------------------------------------


def make_trainer(out_dir, steps, compute_loss=lm_loss, **config):
    tok = CharTokenizer.from_text(TEXT)
    ids = tok.encode(TEXT)
    train, val = split_train_val(ids, 0.1)
    tt.manual_seed(0)
    model = TinyCharLM(tok.vocab_size)
    optimizer = make_adamw(model, lr=3e-2, weight_decay=0.1)
    scheduler = warmup_cosine(optimizer, warmup_steps=2, total_steps=steps)
    batches = RandomWindows(train, block_size=16, batch_size=8, seed=1)
    val_x, val_y = fixed_windows(val, 16, 4)

    def evaluate(m):
        return {"val_loss": lm_loss(m, (val_x, val_y)).item()}

    options = dict(
        steps=steps,
        out_dir=str(out_dir),
        eval_every=4,
        checkpoint_every=100,
        progress=False,
        plot=False,
        tokens_per_step=128,
    )
    options.update(config)
    return Trainer(
        model,
        optimizer,
        scheduler,
        batches,
        compute_loss,
        evaluate,
        TrainConfig(**options),
        meta={"vocab": tok.state_dict()},
    )


def test_a_few_steps_reduce_the_loss(tmp_path):
    result = make_trainer(tmp_path, steps=30, plot=True).fit()
    losses = result.history["train_loss"]
    assert len(losses) == 30 and result.step == 30
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    assert result.history["val_loss"][-1] < result.history["val_loss"][0]
    assert os.path.getsize(result.plot_path) > 1000  # a PNG was drawn
    assert result.tokens_per_second > 0
    # the steady rate covers the 29 steps after the first: their time is within the run's total
    tokens_per_step = result.tokens_per_second * result.seconds / 30
    assert 0 < tokens_per_step * 29 / result.steady_tokens_per_second < result.seconds


def test_one_step_has_no_steady_rate(tmp_path):
    result = make_trainer(tmp_path, steps=1).fit()
    assert result.tokens_per_second > 0 and result.steady_tokens_per_second == 0.0


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(tmp_path):
    full = make_trainer(tmp_path / "full", steps=10).fit()
    first = make_trainer(tmp_path / "split", steps=10)
    first.config.steps = 4  # stop early, as if the run had been killed after its checkpoint
    first.fit()
    second = make_trainer(tmp_path / "split", steps=10)
    assert second.resume() == 4
    resumed = second.fit()
    assert resumed.history["train_loss"] == full.history["train_loss"]  # bit for bit
    assert resumed.history["val_loss"][-1] == full.history["val_loss"][-1]
    assert load_checkpoint(resumed.checkpoint_path)["step"] == 10


def test_keyboard_interrupt_leaves_a_checkpoint_that_resumes_exactly(tmp_path):
    calls = {"n": 0}

    def interrupted_at_step_6(model, batch):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return lm_loss(model, batch)

    trainer = make_trainer(tmp_path / "a", steps=10, compute_loss=interrupted_at_step_6)
    result = trainer.fit()
    assert result.interrupted and result.step == 5
    state = load_checkpoint(result.checkpoint_path)
    assert state["step"] == 5 and len(state["history"]["train_loss"]) == 5
    again = make_trainer(tmp_path / "a", steps=10)
    again.resume()
    resumed = again.fit()
    full = make_trainer(tmp_path / "b", steps=10).fit()
    assert resumed.history["train_loss"] == full.history["train_loss"]


def test_resume_without_a_checkpoint_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        make_trainer(tmp_path, steps=2).resume()


def test_resuming_a_finished_run_trains_no_more_and_reports_its_last_evaluation(tmp_path):
    full = make_trainer(tmp_path, steps=6).fit()
    again = make_trainer(tmp_path, steps=6)
    again.resume()
    result = again.fit()
    assert result.step == 6 and len(result.history["train_loss"]) == 6
    assert result.last_eval["val_loss"] == full.history["val_loss"][-1]
    # the time and throughput are those of the run that did the training
    assert full.seconds <= result.seconds < full.seconds + 1.0
    assert result.tokens_per_second > 0


def test_a_non_finite_loss_stops_with_advice_before_updating_the_weights(tmp_path):
    def nan_loss(model, batch):
        return lm_loss(model, batch) * float("nan")

    trainer = make_trainer(tmp_path, steps=3, compute_loss=nan_loss)
    before = {k: v.numpy().copy() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(FloatingPointError, match="--lr"):
        trainer.fit()
    for k, v in trainer.model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
