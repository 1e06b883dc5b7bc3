"""Hostile checkpoint folders: `models.from_pretrained` trusts nothing in them.

Each case starts from a valid tiny folder written by our own `save_pretrained` (no transformers
needed) and breaks one thing: a config field of the wrong type or size, a config that disagrees
with the weights (`n_layer: 1000000000` must be an error, not an allocation), a tensor of the
wrong shape or dtype, a shard index pointing outside the folder, a symlink out of it, a FIFO.
Every case must raise a CheckpointError that names the folder or file and what is wrong,
without chaining a low-level traceback, and without building the model where the config lies.
"""

import json
import os
import shutil
import threading

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from tinytensor.models.bart import BART, BARTConfig
from tinytensor.models.bert import BERT, BERTConfig
from tinytensor.models.gpt import GPT, GPTConfig
from tinytensor.models.t5 import T5, T5Config

from tinytensor import models
from tinytensor.serialization import CheckpointError

TINY = {
    "gpt2": lambda: GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=16)),
    "bert": lambda: BERT(
        BERTConfig(
            vocab_size=50, max_position_embeddings=16, n_layer=2, n_head=2, d_model=16, d_ff=24
        )
    ),
    "t5": lambda: T5(T5Config(vocab_size=50, d_model=16, d_kv=4, d_ff=24, n_layer=2, n_head=2)),
    "bart": lambda: BART(
        BARTConfig(
            vocab_size=50, max_position_embeddings=16, d_model=16, n_layer=2, n_head=2, d_ff=24
        )
    ),
}


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    root = tmp_path_factory.mktemp("originals")
    for kind, make in TINY.items():
        make().save_pretrained(root / kind)
    return root


@pytest.fixture
def folder(originals, tmp_path):
    """A fresh copy of a valid folder per test: folder(kind) -> path."""

    def copy(kind="gpt2"):
        dst = tmp_path / "ckpt"
        shutil.copytree(originals / kind, dst)
        return dst

    return copy


def edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    for key, value in changes.items():
        if value is REMOVE:
            del config[key]
        else:
            config[key] = value
    (path / "config.json").write_text(json.dumps(config))


REMOVE = object()


def assert_checkpoint_error(path, match, names=None):
    with pytest.raises(CheckpointError, match=match) as info:
        models.from_pretrained(path)
    message = str(info.value)
    assert str(names or path) in message, f"the error does not name {names or path}: {message}"
    assert info.value.__cause__ is None and (
        info.value.__context__ is None or info.value.__suppress_context__
    ), "the error chains a low-level traceback"
    return message


def test_the_tiny_folders_load(originals):
    for kind in TINY:
        assert type(models.from_pretrained(originals / kind)).__name__ == kind.upper().replace(
            "GPT2", "GPT"
        )


# ---- config.json: types and ranges, before anything is read or built -----------------------------

NOT_VALID = "is not valid: {} must be"
CONFIG_CASES = [
    # (kind, field, value, what the message must say)
    ("gpt2", "n_layer", 10**9, r"n_layer=1000000000 \(int\) is not valid.*\[1, 10000\]"),
    ("gpt2", "n_layer", -1, NOT_VALID.format("n_layer")),
    ("gpt2", "n_layer", 0, NOT_VALID.format("n_layer")),
    ("gpt2", "n_layer", "12", r"n_layer='12' \(str\) is not valid"),
    ("gpt2", "n_layer", 2.0, r"n_layer=2.0 \(float\) is not valid"),
    ("gpt2", "n_layer", True, r"n_layer=True \(bool\) is not valid"),
    ("gpt2", "n_layer", None, r"n_layer=None \(NoneType\) is not valid"),
    ("gpt2", "n_layer", [2], r"n_layer=\[2\] \(list\) is not valid"),
    ("gpt2", "vocab_size", 10**12, NOT_VALID.format("vocab_size")),
    ("gpt2", "vocab_size", REMOVE, "lacks the field 'vocab_size'"),
    ("gpt2", "n_embd", -16, NOT_VALID.format("n_embd")),
    ("gpt2", "n_head", 0, NOT_VALID.format("n_head")),
    ("gpt2", "n_inner", "big", NOT_VALID.format("n_inner")),
    ("gpt2", "resid_pdrop", 1.5, r"resid_pdrop=1.5 .*a number in \[0, 1\]"),
    ("gpt2", "attn_pdrop", -0.1, NOT_VALID.format("attn_pdrop")),
    ("gpt2", "layer_norm_epsilon", -1e-5, NOT_VALID.format("layer_norm_epsilon")),
    ("gpt2", "layer_norm_epsilon", 0, NOT_VALID.format("layer_norm_epsilon")),
    ("gpt2", "tie_word_embeddings", "yes", NOT_VALID.format("tie_word_embeddings")),
    ("gpt2", "activation_function", 5, NOT_VALID.format("activation_function")),
    ("gpt2", "bos_token_id", -1, NOT_VALID.format("bos_token_id")),
    ("gpt2", "architectures", "GPT2LMHeadModel", NOT_VALID.format("architectures")),
    ("gpt2", "model_type", ["gpt2"], "model_type=\\['gpt2'\\]"),
    ("bert", "num_hidden_layers", 10**9, NOT_VALID.format("num_hidden_layers")),
    ("bert", "hidden_dropout_prob", 2, NOT_VALID.format("hidden_dropout_prob")),
    ("bert", "intermediate_size", REMOVE, "lacks the field 'intermediate_size'"),
    ("t5", "num_layers", "2", NOT_VALID.format("num_layers")),
    ("t5", "d_kv", 0, NOT_VALID.format("d_kv")),
    ("t5", "num_decoder_layers", 10**6, NOT_VALID.format("num_decoder_layers")),
    ("bart", "encoder_layers", 0, NOT_VALID.format("encoder_layers")),
    ("bart", "dropout", float("inf"), "Infinity is not a JSON value"),  # json.dumps writes it
]


@pytest.mark.parametrize("kind, field, value, match", CONFIG_CASES)
def test_config_field_of_wrong_type_or_range(folder, kind, field, value, match):
    path = folder(kind)
    edit_config(path, **{field: value})
    assert_checkpoint_error(path, match)


# ---- config.json against the weights: sizes agree before the model is allocated -----------------

SIZE_CASES = [
    ("gpt2", dict(n_layer=9999), "n_layer=9999 but the weights hold 2 layers \\(h.0 to h.1\\)"),
    ("gpt2", dict(n_layer=1), "n_layer=1 but the weights hold 2 layers"),
    ("gpt2", dict(vocab_size=10**6), r"vocab_size=1000000 but the weights' wte.weight has shape"),
    ("gpt2", dict(n_embd=32), r"n_embd=32 but the weights' wte.weight has shape \(50, 16\)"),
    ("gpt2", dict(n_positions=4096), "n_positions=4096 but the weights' wpe.weight"),
    ("gpt2", dict(n_positions=REMOVE), "n_positions=1024 but the weights' wpe.weight"),
    ("gpt2", dict(n_inner=10**6), "n_inner=1000000 but the weights' h.0.mlp.c_fc.weight"),
    ("bert", dict(num_hidden_layers=3), "num_hidden_layers=3 but the weights hold 2 layers"),
    ("bert", dict(intermediate_size=48), "intermediate_size=48 but the weights'"),
    ("bert", dict(type_vocab_size=3), "type_vocab_size=3 but the weights'"),
    ("bert", dict(max_position_embeddings=REMOVE), "max_position_embeddings=512 but"),
    ("bert", dict(hidden_size=10**6), "hidden_size=1000000 but the weights'"),
    ("t5", dict(d_kv=8), r"num_heads \* d_kv=16 but the weights'"),
    ("t5", dict(num_decoder_layers=3), "num_decoder_layers=3 but the weights hold 2 layers"),
    ("t5", dict(d_ff=100), "d_ff=100 but the weights'"),
    ("t5", dict(relative_attention_num_buckets=64), "relative_attention_num_buckets=64 but"),
    ("t5", dict(vocab_size=10**6), "vocab_size=1000000 but the weights' shared.weight"),
    ("bart", dict(max_position_embeddings=1024), "max_position_embeddings=1024 but"),
    ("bart", dict(decoder_layers=5), "decoder_layers=5 but the weights hold 2 layers"),
    ("bart", dict(decoder_ffn_dim=100), "decoder_ffn_dim=100 but the weights'"),
    ("bart", dict(d_model=4096), "d_model=4096 but the weights' shared.weight"),
]


@pytest.mark.parametrize("kind, changes, match", SIZE_CASES)
def test_config_sizes_that_disagree_with_the_weights(folder, kind, changes, match, monkeypatch):
    path = folder(kind)
    edit_config(path, **changes)
    built = []
    cls = type(TINY[kind]())
    monkeypatch.setattr(cls, "__init__", lambda *a, **k: built.append(1) or None)
    assert_checkpoint_error(path, match)
    assert not built, "the model was built before the sizes were checked"


def test_heads_that_do_not_divide_the_width_cannot_build(folder):
    path = folder("gpt2")
    edit_config(path, n_head=3)  # 16 % 3: no model has this shape
    assert_checkpoint_error(path, "cannot build")


# ---- config.json as a file --------------------------------------------------------------------


def write_config_text(path, text):
    (path / "config.json").unlink()
    (path / "config.json").write_bytes(text if isinstance(text, bytes) else text.encode())


def good_config(path):
    return (path / "config.json").read_text()


CONFIG_FILE_CASES = {
    "NaN literal": lambda c: c.replace('"n_layer": 2', '"n_layer": NaN'),
    "duplicate key": lambda c: c.replace('"n_layer": 2', '"n_layer": 2, "n_layer": 1000000000'),
    "deeply nested": lambda c: c[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
    "a JSON list": lambda c: "[" + c + "]",
    "not UTF-8": lambda c: c.encode()[:-1] + b', "x": "\xff"}',
    "truncated": lambda c: c[: len(c) // 2],
    "empty": lambda c: "",
    "over 16 MB": lambda c: c[:-1] + ', "x": "' + "a" * (17 * 2**20) + '"}',
}
CONFIG_FILE_MATCHES = {
    "NaN literal": "NaN is not a JSON value",
    "duplicate key": "the key 'n_layer' appears twice",
    "deeply nested": "nests JSON 50001 levels deep",
    "a JSON list": "does not hold a JSON object",
    "not UTF-8": "is not valid UTF-8",
    "truncated": "not valid JSON",
    "empty": "not valid JSON",
    "over 16 MB": "more than the 16777216-byte limit",
}


@pytest.mark.parametrize("case", list(CONFIG_FILE_CASES))
def test_config_file_that_is_not_clean_json(folder, case):
    path = folder("gpt2")
    text = json.dumps(json.loads(good_config(path)))  # one line, ", "-separated
    write_config_text(path, CONFIG_FILE_CASES[case](text))
    assert_checkpoint_error(path, CONFIG_FILE_MATCHES[case], names=path / "config.json")


def from_pretrained_with_timeout(path, seconds=20):
    outcome = {}

    def run():
        try:
            outcome["value"] = models.from_pretrained(path)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"from_pretrained({path}) hung"
    return outcome


fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here (Windows)")


@fifo_only
@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_fifo_in_the_folder_is_refused_without_hanging(folder, name):
    path = folder("gpt2")
    (path / name).unlink()
    os.mkfifo(path / name)
    error = from_pretrained_with_timeout(path).get("error")
    assert isinstance(error, CheckpointError) and "FIFO" in str(error), error
    assert str(path / name) in str(error)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_symlink_out_of_the_folder_is_refused(folder, tmp_path, name):
    path = folder("gpt2")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(path / name, outside / name)  # a valid file, just not in the folder
    (path / name).symlink_to(outside / name)
    assert_checkpoint_error(path, f"symlink to .*{name}.*outside the checkpoint folder")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_directory_where_a_file_belongs(folder, name):
    path = folder("gpt2")
    (path / name).unlink()
    (path / name).mkdir()
    assert_checkpoint_error(path, "is a directory, not a regular file")


def test_a_symlink_inside_the_folder_is_fine(folder):
    path = folder("gpt2")
    (path / "model.safetensors").rename(path / "weights-v1.safetensors")
    (path / "model.safetensors").symlink_to("weights-v1.safetensors")
    assert isinstance(models.from_pretrained(path), GPT)


def test_the_huggingface_hub_cache_layout_loads(originals, tmp_path):
    """snapshots/<rev>/ holds symlinks into the repo's blobs/: the one allowed way out."""
    repo = tmp_path / "models--tiny--gpt2"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    for i, name in enumerate(["config.json", "model.safetensors"]):
        shutil.copy(originals / "gpt2" / name, repo / "blobs" / f"blob{i}")
        (snapshot / name).symlink_to(f"../../blobs/blob{i}")
    assert isinstance(models.from_pretrained(snapshot), GPT)


# ---- the weights: shapes, dtypes and names ------------------------------------------------------


def edit_weights(path, edit):
    weights = load_file(str(path / "model.safetensors"))
    edit(weights)
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})


def _set(name, array):
    return lambda w: w.__setitem__(name, array)


def _rename(old, new):
    return lambda w: w.__setitem__(new, w.pop(old))


WEIGHT_CASES = {
    "fused qkv that does not split in 3": (
        _set("transformer.h.0.attn.c_attn.weight", np.zeros((16, 47), np.float32)),
        "h.0.attn.c_attn.weight has shape \\(16, 47\\), whose last dim does not split into 3",
    ),
    "a norm of the wrong size": (
        _set("transformer.h.1.ln_2.weight", np.zeros(17, np.float32)),
        r"h.1.ln_2.weight has shape \(17,\) but GPT.blocks.1.norm2.weight needs \(16,\)",
    ),
    "an integer weight": (
        _set("transformer.h.0.ln_1.bias", np.zeros(16, np.int64)),
        "h.0.ln_1.bias has dtype int64, but GPT.blocks.0.norm1.bias is a floating-point",
    ),
    "a missing tensor": (
        lambda w: w.pop("transformer.h.1.ln_2.bias"),
        r"lacks 1 tensor\(s\) that GPT needs, e.g. \['h.1.ln_2.bias'\]",
    ),
    "an unknown tensor": (
        _set("transformer.h.0.attn.rotary.weight", np.zeros(3, np.float32)),
        "holds 1 tensor\\(s\\) that GPT does not know",
    ),
    "a gap in the layer numbers": (
        lambda w: [_rename(k, k.replace(".h.1.", ".h.2."))(w) for k in list(w) if ".h.1." in k],
        r"n_layer=2 but the weights hold h layers numbered \[0, 2\]",
    ),
    "no token embedding": (
        lambda w: w.pop("transformer.wte.weight"),
        "the weights lack 'wte.weight', which config.json's vocab_size=50 sizes",
    ),
    "a 0-d tensor where a matrix belongs": (
        _set("transformer.wpe.weight", np.array(1.0, np.float32)),
        r"n_positions=16 but the weights' wpe.weight has shape \(\)",
    ),
}


@pytest.mark.parametrize("case", list(WEIGHT_CASES))
def test_weights_that_do_not_fit_the_model(folder, case):
    path = folder("gpt2")
    edit, match = WEIGHT_CASES[case]
    edit_weights(path, edit)
    assert_checkpoint_error(path, match)


def test_a_hostile_safetensors_header_in_the_folder(folder):
    path = folder("gpt2")
    header = b'{"w":{"dtype":"F32","shape":[34359738368],"data_offsets":[0,137438953472]}}'
    (path / "model.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + bytes(5000)
    )
    assert_checkpoint_error(path, "cannot read .*model.safetensors.*cover the data section exactly")


# ---- sharded checkpoints: the index --------------------------------------------------------------


def shard(path, index_edit=None):
    """Splits path's model.safetensors into two shards and an index (optionally edited)."""
    weights = load_file(str(path / "model.safetensors"))
    (path / "model.safetensors").unlink()
    names = sorted(weights)
    halves = {"model-00001-of-00002.safetensors": names[::2]}
    halves["model-00002-of-00002.safetensors"] = names[1::2]
    weight_map = {}
    for file, part in halves.items():
        save_file({n: weights[n] for n in part}, str(path / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    if index_edit:
        index_edit(index)
    text = index if isinstance(index, str) else json.dumps(index)
    (path / "model.safetensors.index.json").write_text(text)
    return names


def test_a_sharded_folder_loads_the_same_model(folder, originals):
    path = folder("gpt2")
    shard(path)
    single, sharded = models.from_pretrained(originals / "gpt2"), models.from_pretrained(path)
    for (name, a), (_, b) in zip(single.named_parameters(), sharded.named_parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def _point_first_at(target):
    def edit(index):
        first = next(iter(index["weight_map"]))
        index["weight_map"][first] = target(index["weight_map"][first])

    return edit


INDEX_CASES = {
    "../ in a shard name": (
        _point_first_at(lambda f: "../" + f),
        r"names the file '\.\./model-0000.*outside the checkpoint folder",
    ),
    "a sub/../../ shard name": (
        _point_first_at(lambda f: "sub/../../" + f),
        "outside the checkpoint folder",
    ),
    "an absolute shard path": (
        _point_first_at(lambda f: "/etc/passwd"),
        "names the file '/etc/passwd', which lies outside",
    ),
    "an empty shard name": (_point_first_at(lambda f: ""), "names the file '', which is not"),
    "a shard name with NUL": (_point_first_at(lambda f: f + "\x00"), "which is not a file name"),
    "a shard name that is a number": (_point_first_at(lambda f: 7), 'no "weight_map" object'),
    "no weight_map": (lambda index: index.pop("weight_map"), 'no "weight_map" object'),
    "weight_map a list": (
        lambda index: index.__setitem__("weight_map", ["a"]),
        'no "weight_map" object',
    ),
    "a tensor listed in the wrong shard": (
        _point_first_at(lambda f: f.replace("00001-of", "00002-of")),
        "puts '.*' in '.*model-00002-of-00002.safetensors', which does not hold it",
    ),
    "a shard that does not exist": (
        _point_first_at(lambda f: "model-00003-of-00002.safetensors"),
        "no such file",
    ),
}


@pytest.mark.parametrize("case", list(INDEX_CASES))
def test_shard_index_that_lies(folder, case):
    path = folder("gpt2")
    edit, match = INDEX_CASES[case]
    shard(path, edit)
    assert_checkpoint_error(path, match)


def test_shard_index_that_is_not_clean_json(folder):
    path = folder("gpt2")
    shard(path)
    index = path / "model.safetensors.index.json"
    index.write_text('{"weight_map": ' + "[" * 10_000 + "]" * 10_000 + "}")
    assert_checkpoint_error(path, "nests JSON 10001 levels deep", names=index)
    index.write_text('{"weight_map": {}, "weight_map": {}}')
    assert_checkpoint_error(path, "appears twice", names=index)


def test_a_tensor_in_two_shards(folder):
    path = folder("gpt2")
    names = shard(path)
    first = load_file(str(path / "model-00001-of-00002.safetensors"))
    second = load_file(str(path / "model-00002-of-00002.safetensors"))
    second[names[0]] = first[names[0]]  # a second copy, which would silently win
    save_file(second, str(path / "model-00002-of-00002.safetensors"))
    assert_checkpoint_error(path, f"tensor '{names[0]}' is in both")


def test_a_shard_symlinked_out_of_the_folder(folder, tmp_path):
    path = folder("gpt2")
    shard(path)
    outside = tmp_path / "outside.safetensors"
    shutil.move(path / "model-00002-of-00002.safetensors", outside)
    (path / "model-00002-of-00002.safetensors").symlink_to(outside)
    assert_checkpoint_error(path, "is a symlink to .*outside.safetensors.*outside the checkpoint")


@fifo_only
def test_a_fifo_shard_index_is_refused_without_hanging(folder):
    path = folder("gpt2")
    shard(path)
    (path / "model.safetensors.index.json").unlink()
    os.mkfifo(path / "model.safetensors.index.json")
    error = from_pretrained_with_timeout(path).get("error")
    assert isinstance(error, CheckpointError) and "FIFO" in str(error), error


def test_count_of_hostile_folder_cases():
    cases = (
        len(CONFIG_CASES)
        + len(SIZE_CASES)
        + 1  # heads that do not divide the width
        + len(CONFIG_FILE_CASES)
        + 2 * 3  # FIFO, symlink out, directory: for config.json and model.safetensors
        + len(WEIGHT_CASES)
        + 1  # hostile safetensors header
        + len(INDEX_CASES)
        + 2  # index: too deep, duplicate key
        + 3  # tensor in two shards, shard symlinked out, FIFO index
    )
    print(f"{cases} hostile checkpoint folders")
    assert cases >= 80


def test_an_interrupted_save_pretrained_keeps_the_previous_checkpoint(
    originals, tmp_path, monkeypatch
):
    from tinytensor.serialization import safetensors_format

    path = tmp_path / "ckpt"
    shutil.copytree(originals / "gpt2", path)
    before = {p.name: p.read_bytes() for p in path.iterdir()}

    def crash(f, array):
        raise OSError("simulated crash: disk full")

    monkeypatch.setattr(safetensors_format, "write_array", crash)
    with pytest.raises(OSError, match="simulated crash"):
        TINY["gpt2"]().save_pretrained(path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == {
        **before,
        "config.json": (path / "config.json").read_bytes(),  # written first, complete
    }
    assert isinstance(models.from_pretrained(path), GPT)
