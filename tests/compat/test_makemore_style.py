"""The makemore-style program (tests/compat/makemore_style.py) run on torch and on tinytensor with
the same weights and batches: logits, loss, every gradient and the AdamW step in float64 for all six
model kinds; a 20-step float32 loss curve; the word Dataset, the endless loader, sampling and the
inference_mode evaluation."""

import numpy as np
import pytest
import torch
import torch.utils.data as torch_data

import tinytensor as tt
import tinytensor.utils.data as tt_data

from . import makemore_style as mm
from ._compare import (
    assert_curves_close,
    assert_same_named,
    copy_weights,
    default_dtype,
    grads_by_name,
    max_diff,
    params_by_name,
)

KINDS = ["bigram", "mlp", "rnn", "gru", "bow", "transformer"]
WORDS = [
    "emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn", "abigail",
    "ella", "luna", "lily", "zoe", "nora", "leah", "anna", "ivy", "eva", "aria",
]  # fmt: skip


def _datasets(lib, Dataset):
    """The same train/test split in both libraries (their random streams differ by design)."""
    chars = sorted(set("".join(WORDS)))
    WordDataset = mm.make_dataset_class(lib, Dataset)
    longest = max(len(w) for w in WORDS)
    return WordDataset(WORDS[:18], chars, longest), WordDataset(WORDS[18:], chars, longest)


def _config(dataset):
    return mm.ModelConfig(
        block_size=dataset.get_output_length(), vocab_size=dataset.get_vocab_size()
    )


def _batches(n, batch_size=6, seed=0):
    """Batches from the torch dataset, as NumPy (both libraries get the same integers)."""
    train, _ = _datasets(torch, torch_data.Dataset)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        rows = [train[int(i)] for i in rng.integers(0, len(train), batch_size)]
        out.append((np.stack([r[0].numpy() for r in rows]), np.stack([r[1].numpy() for r in rows])))
    return out, _config(train)


def _pair(kind, config):
    """The model in both libraries, in the default dtype, with the same weights."""
    torch.manual_seed(1)
    ours = mm.build(torch, kind, config)
    for p in ours.parameters():  # the bigram table starts at zero: give every model a real start
        torch.nn.init.normal_(p, std=0.3)
    theirs = mm.build(tt, kind, config)
    copy_weights(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("kind", KINDS)
@default_dtype("float64")
def test_one_step_float64(kind):
    batches, config = _batches(1)
    ref, model = _pair(kind, config)
    x, y = batches[0]
    ref_logits, ref_loss = ref(torch.from_numpy(x), torch.from_numpy(y))
    logits, loss = model(tt.from_numpy(x), tt.from_numpy(y))
    assert max_diff(ref_logits, logits) < 1e-12
    assert max_diff(ref_loss, loss) < 1e-12
    ref_loss.backward()
    loss.backward()
    assert_same_named(grads_by_name(ref), grads_by_name(model), 1e-12, "gradient")
    for lib, m in ((torch, ref), (tt, model)):
        opt = lib.optim.AdamW(
            m.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8
        )
        opt.step()
    assert_same_named(params_by_name(ref), params_by_name(model), 1e-12, "parameter after step")


@pytest.mark.parametrize("kind", KINDS)
def test_loss_curve_float32(kind):
    batches, config = _batches(20)
    ref, model = _pair(kind, config)
    ref_losses = mm.train(
        torch, ref, [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
    )
    losses = mm.train(tt, model, [(tt.from_numpy(x), tt.from_numpy(y)) for x, y in batches])
    assert min(ref_losses[-5:]) < ref_losses[0]  # it learns
    assert_curves_close(ref_losses, losses)


def test_mlp_roll_leaves_the_input_alone():
    """The MLP rolls its context and writes into the roll; the caller's batch must not change."""
    batches, config = _batches(1)
    _, model = _pair("mlp", config)
    x = tt.from_numpy(batches[0][0].copy())
    model(x)
    np.testing.assert_array_equal(x.numpy(), batches[0][0])
    one = tt.tensor([[1, 2, 3]])
    rolled = tt.roll(one, 3, 1)  # a full turn: PyTorch still returns a new tensor
    rolled[:, 0] = 9
    assert one.tolist() == [[1, 2, 3]]


def test_word_dataset_items_and_split_match():
    ref_train, ref_test = _datasets(torch, torch_data.Dataset)
    train, test = _datasets(tt, tt_data.Dataset)
    assert len(train) == len(ref_train) and len(test) == len(ref_test)
    for i in range(len(ref_train)):
        for a, b in zip(ref_train[i], train[i]):
            assert a.tolist() == b.tolist()
            assert b.dtype == tt.int64
    assert train.decode(train.encode("ava").tolist()) == "ava"


def test_create_datasets_splits_by_randperm():
    tt.manual_seed(0)
    train, test = mm.create_datasets(tt, tt_data.Dataset, WORDS)
    assert sorted(train.words + test.words) == sorted(WORDS)
    assert len(test) == 2 and train.get_vocab_size() == len(set("".join(WORDS))) + 1
    tt.manual_seed(0)
    again, _ = mm.create_datasets(tt, tt_data.Dataset, WORDS)
    assert again.words == train.words  # reproducible under manual_seed


def test_infinite_loader_draws_forever_from_a_huge_sampler():
    train, _ = _datasets(tt, tt_data.Dataset)
    tt.manual_seed(3)
    loader = mm.InfiniteDataLoader(tt, tt_data.DataLoader, train, batch_size=4, pin_memory=True)
    assert len(loader.train_loader.sampler) == int(1e10)
    rows = {tuple(x.tolist()) for x in (train[i][0] for i in range(len(train)))}
    for _ in range(10):  # 40 draws from 18 words: only possible with replacement
        X, Y = loader.next()
        assert tuple(X.shape) == (4, train.get_output_length())
        assert X.dtype == tt.int64 and Y.dtype == tt.int64
        assert all(tuple(r) in rows for r in X.tolist())
        assert (Y == -1).any().item() or (Y >= 0).all().item()


def test_infinite_loader_with_worker_processes():
    train, _ = _datasets(tt, tt_data.Dataset)
    loader = mm.InfiniteDataLoader(
        tt, tt_data.DataLoader, train, batch_size=4, pin_memory=True, num_workers=2
    )
    shapes = [tuple(loader.next()[0].shape) for _ in range(5)]
    assert shapes == [(4, train.get_output_length())] * 5


@default_dtype("float64")
def test_greedy_generation_matches_and_sampling_is_valid():
    batches, config = _batches(1)
    train, _ = _datasets(tt, tt_data.Dataset)
    ref_train, _ = _datasets(torch, torch_data.Dataset)
    for kind in KINDS:
        ref, model = _pair(kind, config)
        ref_words = mm.sample_words(torch, ref, ref_train, 3, do_sample=False)
        words = mm.sample_words(tt, model, train, 3, do_sample=False)
        assert words == ref_words, kind
        tt.manual_seed(0)
        sampled = mm.sample_words(tt, model, train, 4, top_k=3)
        assert len(sampled) == 4
        assert all(set(w) <= set(train.chars) for w in sampled)


@default_dtype("float64")
def test_inference_mode_evaluation_matches():
    """A shuffled loader, one batch of all words: the order does not matter."""
    batches, config = _batches(1)
    ref_train, _ = _datasets(torch, torch_data.Dataset)
    train, _ = _datasets(tt, tt_data.Dataset)
    ref, model = _pair("transformer", config)
    ref_loss = mm.evaluate(torch, torch_data.DataLoader, ref, ref_train, batch_size=18)
    loss = mm.evaluate(tt, tt_data.DataLoader, model, train, batch_size=18)
    assert abs(ref_loss - loss) < 1e-12
    assert model.training
