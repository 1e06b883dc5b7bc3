"""What a HuggingFace checkpoint folder must satisfy before a model is built from it.

A folder is data from elsewhere, and data can lie. Three checks, in the order loading meets
them, each failing with a CheckpointError that names the file and what is wrong:

1. Paths stay inside the folder (`resolve_inside`): a shard index naming `../x` or `/etc/x`,
   or a symlink pointing out of the folder, is refused. One exception: the HF hub cache, whose
   `snapshots/<revision>/` files are symlinks into the repository's `blobs/`.
2. `config.json` fields have the right types and ranges (`check_config_fields`): sizes are
   positive integers, probabilities lie in [0, 1], epsilons are positive and finite. A bool is
   not an integer here, though Python says it is.
3. Every config field that sizes a tensor agrees with the files (`check_sizes_against_weights`),
   before anything is allocated: `n_layer: 1000000000` with a 12-layer file is an error, not
   an allocation that runs until the machine kills it. After the model is built,
   `hf.state_from_hf` compares every parameter's shape with its tensor exactly.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from tinytensor.serialization import CheckpointError

MAX_LAYERS = 10_000  # far above any real model (GPT-3 has 96 layers)
MAX_SIZE = 2**31 - 1  # a dimension NumPy's int32 indexing and every kernel can address


# ---- 1. paths -----------------------------------------------------------------------------------


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, path]) == root


def _in_hub_cache(root: str, target: str) -> bool:
    """`root` is `<repo>/snapshots/<revision>` of the HF hub cache and target a `<repo>/blobs`."""
    snapshots = os.path.dirname(root)
    if os.path.basename(snapshots) != "snapshots":
        return False
    return _inside(os.path.join(os.path.dirname(snapshots), "blobs"), target)


def resolve_inside(folder: str, name: str, named_by: str) -> str:
    """The path of `name` (a file name relative to `folder`), if it stays inside `folder`.

    Args:
        folder: the checkpoint folder.
        name: the relative file name, e.g. a shard from the index.
        named_by: what gave the name, for messages (the index file, or "from_pretrained").
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise CheckpointError(f"{named_by} names the file {name!r}, which is not a file name")
    parts = re.split(r"[\\/]", name)
    if os.path.isabs(name) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise CheckpointError(
            f"{named_by} names the file {name!r}, which lies outside the checkpoint folder "
            f"{folder!r}: only paths inside it are read"
        )
    path = os.path.join(folder, name)
    root, target = os.path.realpath(folder), os.path.realpath(path)
    if not (_inside(root, target) or _in_hub_cache(root, target)):
        raise CheckpointError(
            f"from_pretrained: {path!r} is a symlink to {target!r}, outside the checkpoint "
            f"folder {folder!r}: only files inside it are read (copy the file in instead)"
        )
    return path


# ---- 2. config field types and ranges ----------------------------------------------------------


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# kind -> (test, what a valid value is)
_KINDS = {
    "size": (lambda v: _is_int(v) and 1 <= v <= MAX_SIZE, f"an integer in [1, {MAX_SIZE}]"),
    "layers": (lambda v: _is_int(v) and 1 <= v <= MAX_LAYERS, f"an integer in [1, {MAX_LAYERS}]"),
    "prob": (lambda v: _is_real(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "eps": (lambda v: _is_real(v) and 0 < v < 1, "a number in (0, 1)"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "token": (lambda v: _is_int(v) and 0 <= v <= MAX_SIZE, "a token id: an integer >= 0"),
    "name": (lambda v: isinstance(v, str), "a string"),
}

_COMMON = {"model_type": "name?", "architectures": "names?"}
_PROBS = dict.fromkeys(["resid_pdrop", "embd_pdrop", "attn_pdrop"], "prob")
# field -> kind; "!" marks the fields from_hf requires, "?" those that may be null
CONFIG_FIELDS = {
    "gpt2": {
        **dict(vocab_size="size!", n_layer="layers!", n_head="size!", n_embd="size!"),
        **dict(n_positions="size", n_inner="size?", activation_function="name", **_PROBS),
        **dict(layer_norm_epsilon="eps", bos_token_id="token?", eos_token_id="token?"),
        **dict(pad_token_id="token?", tie_word_embeddings="bool", scale_attn_weights="bool"),
        "scale_attn_by_inverse_layer_idx": "bool",
    },
    "bert": {
        **dict(vocab_size="size!", num_hidden_layers="layers!", num_attention_heads="size!"),
        **dict(hidden_size="size!", intermediate_size="size!", max_position_embeddings="size"),
        **dict(type_vocab_size="size", hidden_act="name", hidden_dropout_prob="prob"),
        **dict(attention_probs_dropout_prob="prob", layer_norm_eps="eps", pad_token_id="token?"),
        **dict(tie_word_embeddings="bool", is_decoder="bool", add_cross_attention="bool"),
    },
    "t5": {
        **dict(vocab_size="size!", d_model="size!", d_kv="size!", d_ff="size!"),
        **dict(num_layers="layers!", num_heads="size!", num_decoder_layers="layers?"),
        **dict(relative_attention_num_buckets="size", relative_attention_max_distance="size"),
        **dict(dropout_rate="prob", layer_norm_epsilon="eps", feed_forward_proj="name"),
        **dict(tie_word_embeddings="bool", scale_decoder_outputs="bool", pad_token_id="token?"),
        **dict(eos_token_id="token?", decoder_start_token_id="token?", dense_act_fn="name?"),
        "is_gated_act": "bool?",
    },
    "bart": {
        **dict(vocab_size="size!", d_model="size!", encoder_layers="layers!"),
        **dict(encoder_attention_heads="size!", encoder_ffn_dim="size!"),
        **dict(decoder_layers="layers?", decoder_attention_heads="size?"),
        **dict(decoder_ffn_dim="size?", max_position_embeddings="size", dropout="prob"),
        **dict(attention_dropout="prob", activation_dropout="prob", activation_function="name"),
        **dict(scale_embedding="bool", pad_token_id="token?", bos_token_id="token?"),
        **dict(eos_token_id="token?", decoder_start_token_id="token?"),
        "tie_word_embeddings": "bool",
    },
}


def check_config_fields(config: dict, model_type: str, file: str) -> None:
    """Raises a CheckpointError naming the first field of `config` with a wrong type or range."""
    for field, spec in {**_COMMON, **CONFIG_FIELDS[model_type]}.items():
        kind = spec.rstrip("!?")
        if field not in config:
            if spec.endswith("!"):
                raise CheckpointError(
                    f"from_pretrained: {file} lacks the field {field!r}, which a "
                    f"{model_type} model needs"
                )
            continue
        value = config[field]
        if value is None and spec.endswith("?"):
            continue
        if kind == "names":
            ok, wanted = (
                isinstance(value, list) and all(isinstance(v, str) for v in value),
                ("a list of strings"),
            )
        else:
            test, wanted = _KINDS[kind]
            ok = test(value)
        if not ok:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise CheckpointError(
                f"from_pretrained: {file}: {field}={shown} ({type(value).__name__}) is not "
                f"valid: {field} must be {wanted}"
            )


# ---- 3. sizes against the files ----------------------------------------------------------------


@dataclass(frozen=True)
class Dim:
    """The config value is dim `dim` of the first of `tensors` the files hold, minus `offset`."""

    tensors: tuple
    dim: int
    offset: int = 0  # BART's position table has 2 rows more than max_position_embeddings


@dataclass(frozen=True)
class Layers:
    """The config value is the number of layers `prefix.0.`, `prefix.1.`, ... in the files."""

    prefix: str


def _get(field, default=None):
    return lambda c: c[field] if c.get(field) is not None else default


def _product(a, b):
    return lambda c: c[a] * c[b]


def _or(field, fallback):
    return lambda c: c[field] if c.get(field) is not None else c[fallback]


_T5_ATTN = "encoder.block.0.layer.0.SelfAttention."
_TABLES = ("shared.weight", "encoder.embed_tokens.weight")  # the first present sizes the vocab
_T5_FFN = "encoder.block.0.layer.1.DenseReluDense."
# model_type -> [(config field as named in messages, its value, where the files show it)]
SIZES_IN_FILES = {
    "gpt2": [
        ("n_layer", _get("n_layer"), Layers("h")),
        ("vocab_size", _get("vocab_size"), Dim(("wte.weight",), 0)),
        ("n_embd", _get("n_embd"), Dim(("wte.weight",), 1)),
        ("n_positions", _get("n_positions", 1024), Dim(("wpe.weight",), 0)),
        (
            "n_inner",
            lambda c: c.get("n_inner") or 4 * c["n_embd"],
            Dim(("h.0.mlp.c_fc.weight",), 1),  # Conv1D: (in, out)
        ),
    ],
    "bert": [
        ("num_hidden_layers", _get("num_hidden_layers"), Layers("encoder.layer")),
        ("vocab_size", _get("vocab_size"), Dim(("embeddings.word_embeddings.weight",), 0)),
        ("hidden_size", _get("hidden_size"), Dim(("embeddings.word_embeddings.weight",), 1)),
        (
            "max_position_embeddings",
            _get("max_position_embeddings", 512),
            Dim(("embeddings.position_embeddings.weight",), 0),
        ),
        (
            "type_vocab_size",
            _get("type_vocab_size", 2),
            Dim(("embeddings.token_type_embeddings.weight",), 0),
        ),
        (
            "intermediate_size",
            _get("intermediate_size"),
            Dim(("encoder.layer.0.intermediate.dense.weight",), 0),
        ),
    ],
    "t5": [
        ("num_layers", _get("num_layers"), Layers("encoder.block")),
        ("num_decoder_layers", _or("num_decoder_layers", "num_layers"), Layers("decoder.block")),
        ("vocab_size", _get("vocab_size"), Dim(_TABLES, 0)),
        ("d_model", _get("d_model"), Dim(_TABLES, 1)),
        ("d_ff", _get("d_ff"), Dim((_T5_FFN + "wi.weight", _T5_FFN + "wi_0.weight"), 0)),
        ("num_heads * d_kv", _product("num_heads", "d_kv"), Dim((_T5_ATTN + "q.weight",), 0)),
        (
            "relative_attention_num_buckets",
            _get("relative_attention_num_buckets", 32),
            Dim((_T5_ATTN + "relative_attention_bias.weight",), 0),
        ),
        ("num_heads", _get("num_heads"), Dim((_T5_ATTN + "relative_attention_bias.weight",), 1)),
    ],
    "bart": [
        ("encoder_layers", _get("encoder_layers"), Layers("encoder.layers")),
        ("decoder_layers", _or("decoder_layers", "encoder_layers"), Layers("decoder.layers")),
        ("vocab_size", _get("vocab_size"), Dim(_TABLES, 0)),
        ("d_model", _get("d_model"), Dim(_TABLES, 1)),
        (
            "max_position_embeddings",
            _get("max_position_embeddings", 1024),
            Dim(("encoder.embed_positions.weight",), 0, offset=2),
        ),
        ("encoder_ffn_dim", _get("encoder_ffn_dim"), Dim(("encoder.layers.0.fc1.weight",), 0)),
        (
            "decoder_ffn_dim",
            _or("decoder_ffn_dim", "encoder_ffn_dim"),
            Dim(("decoder.layers.0.fc1.weight",), 0),
        ),
    ],
}


def _layer_indices(names, prefix: str) -> set[int]:
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)\.")
    return {int(m.group(1)) for m in map(pattern.match, names) if m}


def check_sizes_against_weights(config, model_type, shapes: dict, where: str) -> None:
    """Raises a CheckpointError when a config field that sizes tensors disagrees with them.

    Args:
        shapes: {HF tensor name without the base-model prefix: shape} of the files.
        where: the checkpoint folder, for messages.
    """
    for field, value_of, rule in SIZES_IN_FILES[model_type]:
        value = value_of(config)
        if isinstance(rule, Layers):
            found = _layer_indices(shapes, rule.prefix)
            if found != set(range(value)):
                if not found:
                    held = f"no {rule.prefix}.<i> layers"
                elif found == set(range(len(found))):
                    last = f"{rule.prefix}.{len(found) - 1}"
                    held = f"{len(found)} layers ({rule.prefix}.0 to {last})"
                else:
                    held = f"{rule.prefix} layers numbered {sorted(found)[:10]}"
                raise CheckpointError(
                    f"from_pretrained: {where}: config.json says {field}={value} but the "
                    f"weights hold {held}"
                )
            continue
        tensor = next((t for t in rule.tensors if t in shapes), None)
        if tensor is None:
            raise CheckpointError(
                f"from_pretrained: {where}: the weights lack {rule.tensors[0]!r}, which "
                f"config.json's {field}={value} sizes"
            )
        shape = shapes[tensor]
        if len(shape) <= rule.dim or shape[rule.dim] - rule.offset != value:
            raise CheckpointError(
                f"from_pretrained: {where}: config.json says {field}={value} but the weights' "
                f"{tensor} has shape {tuple(shape)}"
            )
