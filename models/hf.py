"""HuggingFace checkpoints: read and write `config.json` + `model.safetensors`, without torch.

A checkpoint folder written by transformers' `save_pretrained` holds `config.json` (the
architecture's hyperparameters, with `model_type` naming it) and `model.safetensors` (or shards
listed in `model.safetensors.index.json`). We read both with the standard library, NumPy and the
`safetensors` package, map HF's parameter names onto ours with one dict per architecture (see
the bottom of each model file) and write the same layout back, so transformers can load it too.

    model = tinytensor.models.from_pretrained("path/to/checkpoint")   # picks GPT/BERT/T5/BART
    model.save_pretrained("out/")                                      # transformers can load it

Name mapping: a model's `HF_NAMES` dict maps our parameter names, with every layer index written
`{}`, to HF's: `"blocks.{}.norm1.weight": "h.{}.ln_1.weight"`. A value `(name, part, parts)`
says our tensor is slice `part` of `parts` equal slices of HF's along its last dim (GPT-2 fuses
q, k and v into one c_attn). HF names are written without the base-model prefix
("transformer.", "bert.", "model."): files written by the task heads carry it, files written by
base models (and older checkpoints) do not; both load.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from tinytensor.serialization import CheckpointError, read_safetensors, save_safetensors
from tinytensor.serialization.files import atomic_write, parse_json, read_file

from .hf_validation import (
    check_config_fields,
    check_sizes_against_weights,
    resolve_inside,
)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"

_INDEX = re.compile(r"(?<=\.)\d+(?=\.)")  # a layer index between dots: "blocks.3.attn" -> 3


# ---- files --------------------------------------------------------------------------------------

_MAX_JSON_BYTES = 16 * 2**20  # config.json and the shard index; real ones are a few KB
_MAX_JSON_DEPTH = 32  # config.json nests 3 deep (task_specific_params), the index 2


def _existing_file(path, name: str) -> str | None:
    """`path/name` if something is there (a FIFO or a dangling link too: reading it explains
    what is wrong), checked to stay inside the folder; else None."""
    file = os.path.join(path, name)
    if not os.path.lexists(file):
        return None
    return resolve_inside(path, name, "from_pretrained")


def _read_json(file: str):
    _, raw = read_file(file, "from_pretrained", max_bytes=_MAX_JSON_BYTES)
    return parse_json(raw, f"from_pretrained: {file!r}", _MAX_JSON_DEPTH)


def read_config(path) -> dict:
    """The parsed `config.json` of a checkpoint folder (read strictly: see files.parse_json)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise CheckpointError(f"from_pretrained: no checkpoint folder at {path!r}")
    file = _existing_file(path, CONFIG_NAME)
    if file is None:
        raise CheckpointError(f"from_pretrained: {path!r} has no {CONFIG_NAME}")
    config = _read_json(file)
    if not isinstance(config, dict):
        raise CheckpointError(f"from_pretrained: {file!r} does not hold a JSON object")
    return config


def _load_safetensors_file(file) -> dict:
    """{name: numpy array}; bfloat16 tensors come back as float32."""
    return read_safetensors(file, "from_pretrained")[1]


def _shard_map(path: str, index: str) -> dict:
    """{shard file: [tensor names]} of a shard index, every shard resolved inside `path`."""
    content = _read_json(index)
    weight_map = content.get("weight_map") if isinstance(content, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(
            f'from_pretrained: {index!r} has no "weight_map" object mapping tensor names to '
            "shard file names"
        )
    shards = {}
    for tensor, shard in weight_map.items():
        file = resolve_inside(path, shard, f"from_pretrained: {index!r}")
        shards.setdefault(file, []).append(tensor)
    return shards


def load_weights(path) -> dict:
    """All tensors of a checkpoint folder (single file or shards) as {HF name: numpy array}."""
    path = os.fspath(path)
    single = _existing_file(path, WEIGHTS_NAME)
    if single is not None:
        return _load_safetensors_file(single)
    index = _existing_file(path, WEIGHTS_INDEX_NAME)
    if index is not None:
        weights, source = {}, {}
        for shard, listed in sorted(_shard_map(path, index).items()):
            arrays = _load_safetensors_file(shard)
            for tensor in listed:
                if tensor not in arrays:
                    raise CheckpointError(
                        f"from_pretrained: {index!r} puts {tensor!r} in {shard!r}, which "
                        "does not hold it"
                    )
            for tensor, array in arrays.items():
                if tensor in weights:
                    raise CheckpointError(
                        f"from_pretrained: {path!r}: tensor {tensor!r} is in both "
                        f"{source[tensor]!r} and {shard!r}"
                    )
                weights[tensor], source[tensor] = array, shard
        return weights
    present = sorted(os.listdir(path)) if os.path.isdir(path) else []
    hint = (
        " (only PyTorch pickles: convert them to safetensors with transformers first)"
        if any(name.endswith((".bin", ".pt", ".pth")) for name in present)
        else ""
    )
    raise CheckpointError(
        f"from_pretrained: {path!r} has no {WEIGHTS_NAME} or {WEIGHTS_INDEX_NAME}{hint}; "
        f"found {present[:20]}"
    )


def save_checkpoint(path, config: dict, weights: dict) -> None:
    """Writes `config.json` and `model.safetensors` into `path`, each atomically (a crash
    leaves the previous file, never a truncated one)."""
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    text = json.dumps(config, indent=2, sort_keys=True).encode("utf-8")
    atomic_write(os.path.join(path, CONFIG_NAME), lambda f: f.write(text), "save_pretrained")
    # NOTE: transformers refuses safetensors files whose metadata lacks format="pt"
    save_safetensors(weights, os.path.join(path, WEIGHTS_NAME), metadata={"format": "pt"})


# ---- name mapping -------------------------------------------------------------------------------


def hf_name(ours: str, names: dict) -> tuple:
    """Our parameter name -> (HF name without the base prefix, part, parts), via HF_NAMES."""
    indices = _INDEX.findall(ours)
    pattern = _INDEX.sub("{}", ours)
    if pattern not in names:
        raise KeyError(f"no HuggingFace name is known for parameter {ours!r} ({pattern!r})")
    entry = names[pattern]
    name, part, parts = (entry, 0, 1) if isinstance(entry, str) else entry
    return name.format(*indices), part, parts


def _named_tensors(model):
    """Parameters, then persistent buffers (BART's final_logits_bias): what a checkpoint holds."""
    yield from model.named_parameters()
    modules = dict(model.named_modules())
    for name, buffer in model.named_buffers():
        module_name, _, short = name.rpartition(".")
        if short not in modules[module_name]._non_persistent:
            yield name, buffer


def _unprefixed(name: str, prefix: str) -> str:
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def state_from_hf(model, weights: dict, path="<weights>") -> dict:
    """Picks and reshapes the HF tensors for every parameter of `model`: {our name: array}.

    Accepts names with or without the model's base prefix (`model.HF_PREFIX`). Transposes the
    parameters listed in `model.HF_TRANSPOSED` (GPT-2's Conv1D stores (in, out)). HF tensors
    that are tied copies of one of ours (`model.HF_TIED`, e.g. "lm_head.weight") or buffers
    (`model.HF_IGNORED` patterns) are dropped; anything else unexpected is an error, so that a
    wrong mapping can never load silently.
    """
    by_name = {_unprefixed(name, model.HF_PREFIX): array for name, array in weights.items()}
    state, used, missing = {}, set(), []
    for ours, param in _named_tensors(model):
        theirs, part, parts = hf_name(ours, model.HF_NAMES)
        if theirs not in by_name and model.HF_TIED_SOURCES.get(theirs) in by_name:
            theirs = model.HF_TIED_SOURCES[theirs]  # an untied model from a file that tied it
        if theirs not in by_name:
            missing.append(theirs)
            continue
        array = by_name[theirs]
        if array.dtype.kind != "f":
            raise CheckpointError(
                f"from_pretrained: {path}: {theirs} has dtype {array.dtype}, but "
                f"{type(model).__name__}.{ours} is a floating-point parameter"
            )
        if parts > 1:
            if array.ndim == 0 or array.shape[-1] % parts:
                raise CheckpointError(
                    f"from_pretrained: {path}: {theirs} has shape {tuple(array.shape)}, whose "
                    f"last dim does not split into {parts} equal parts"
                )
            array = np.split(array, parts, axis=-1)[part]
        if _INDEX.sub("{}", ours) in model.HF_TRANSPOSED:
            array = array.T
        if tuple(array.shape) != tuple(param.shape):
            raise CheckpointError(
                f"from_pretrained: {path}: {theirs} has shape {tuple(array.shape)} but "
                f"{type(model).__name__}.{ours} needs {tuple(param.shape)}"
            )
        state[ours] = array
        used.add(theirs)
    if missing:
        raise CheckpointError(
            f"from_pretrained: {path} lacks {len(missing)} tensor(s) that "
            f"{type(model).__name__} needs, e.g. {missing[:5]}"
        )
    unexpected = [
        n
        for n in by_name
        if n not in used
        and n not in model.HF_TIED
        and not any(re.fullmatch(p, n) for p in model.HF_IGNORED)
    ]
    if unexpected:
        raise CheckpointError(
            f"from_pretrained: {path} holds {len(unexpected)} tensor(s) that "
            f"{type(model).__name__} does not know, e.g. {unexpected[:5]}"
        )
    for tied, source in model.HF_TIED_SOURCES.items():
        # a dropped copy must really be a copy: else the config's tying does not match the file
        if tied in by_name and tied not in used and source in by_name:
            if not np.array_equal(by_name[tied], by_name[source]):
                raise CheckpointError(
                    f"from_pretrained: {path}: {tied} differs from {source}, but the config "
                    f"ties them (tie_word_embeddings={model.config.tie_word_embeddings})"
                )
    return state


def state_to_hf(model) -> dict:
    """{HF name with the base prefix: float32 numpy array} for `save_pretrained`."""
    pieces = {}  # HF name -> list of its parts
    for ours, param in _named_tensors(model):
        array = param.numpy().astype(np.float32)
        if _INDEX.sub("{}", ours) in model.HF_TRANSPOSED:
            array = array.T
        theirs, part, parts = hf_name(ours, model.HF_NAMES)
        if not theirs.startswith(model.HF_UNPREFIXED):
            theirs = model.HF_PREFIX + theirs
        pieces.setdefault(theirs, [None] * parts)[part] = array
    return {name: np.concatenate(parts, axis=-1) for name, parts in pieces.items()}


def load_into(model, path) -> None:
    """Loads the weights of checkpoint folder `path` into `model`'s parameters, in place."""
    _assign(model, load_weights(path), repr(os.fspath(path)))


def _assign(model, weights: dict, where: str) -> None:
    state = state_from_hf(model, weights, path=where)
    params = dict(_named_tensors(model))
    for name, array in state.items():
        params[name]._array = _to_like(array, params[name]._array)


def _to_like(array, like):
    """`array` as `like`'s dtype, on `like`'s device (NumPy or CuPy)."""
    from tinytensor.backend import get_array_module

    xp = get_array_module(like)
    return xp.asarray(np.ascontiguousarray(array), dtype=like.dtype)


# ---- architecture dispatch ----------------------------------------------------------------------

# model_type -> (module in tinytensor.models, class name); `architectures` names map here too
ARCHITECTURES = {
    "gpt2": ("gpt", "GPT"),
    "bert": ("bert", "BERT"),
    "t5": ("t5", "T5"),
    "bart": ("bart", "BART"),
}
_ARCHITECTURE_PREFIXES = {"GPT2": "gpt2", "Bert": "bert", "T5": "t5", "Bart": "bart"}


def architecture_of(config: dict, path="<config>") -> str:
    """The model_type a config describes: `model_type`, else guessed from `architectures`."""
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in ARCHITECTURES:
        return model_type
    architectures = config.get("architectures")
    for arch in architectures if isinstance(architectures, list) else []:
        for prefix, kind in _ARCHITECTURE_PREFIXES.items():
            if isinstance(arch, str) and arch.startswith(prefix):
                return kind
    raise CheckpointError(
        f"from_pretrained: {path} describes model_type={model_type!r:.60} "
        f"(architectures={architectures!r:.80}); tinytensor knows {sorted(ARCHITECTURES)}"
    )


def model_class(model_type: str):
    import importlib

    module, name = ARCHITECTURES[model_type]
    return getattr(importlib.import_module(f"tinytensor.models.{module}"), name)


def from_pretrained(path):
    """Loads any supported checkpoint folder, choosing the class from its config.json.

    Example:
        >>> model = tinytensor.models.from_pretrained("checkpoints/gpt2-tiny")
    """
    config = read_config(path)
    return model_class(architecture_of(config, repr(os.fspath(path)))).from_pretrained(path)


class HFCheckpointMixin:
    """`from_pretrained` / `save_pretrained` for a model class that defines:

    `config_class` (with `from_hf(dict)` and `to_hf()`), `HF_NAMES`, `HF_PREFIX` (base-model
    prefix in files written by the task head), `HF_UNPREFIXED` (HF names that sit outside the
    base model, e.g. "cls." for BERT's heads), `HF_TRANSPOSED`, `HF_TIED`, `HF_IGNORED`, and
    `HF_TIED_SOURCES` (tied name -> its source: a tied copy in the file must equal the source,
    and an untied parameter whose tensor the file lacks loads the source).
    """

    HF_PREFIX = ""
    HF_UNPREFIXED: tuple = ()
    HF_TRANSPOSED: frozenset = frozenset()
    HF_TIED: frozenset = frozenset()
    HF_TIED_SOURCES: dict = {}  # tied HF name -> the HF name it copies (checked, or a fallback)
    HF_IGNORED: tuple = ()

    @classmethod
    def from_pretrained(cls, path):
        """Builds the model from `path/config.json` and loads `path/model.safetensors`.

        Nothing in the folder is trusted (see hf_validation.py): config fields are type- and
        range-checked, and the sizes they give are checked against the weight files before
        the model is allocated. Every failure is a CheckpointError naming the file.
        """
        where = repr(os.fspath(path))
        config = read_config(path)
        kind = architecture_of(config, where)
        if model_class(kind) is not cls:
            raise CheckpointError(
                f"{cls.__name__}.from_pretrained: {where} holds a {kind!r} model; "
                "use tinytensor.models.from_pretrained to pick the class from the config"
            )
        check_config_fields(config, kind, repr(os.path.join(os.fspath(path), CONFIG_NAME)))
        weights = load_weights(path)
        prefix = cls.HF_PREFIX
        shapes = {_unprefixed(name, prefix): array.shape for name, array in weights.items()}
        check_sizes_against_weights(config, kind, shapes, where)
        try:
            model = cls(cls.config_class.from_hf(config))
        except (ValueError, TypeError, KeyError) as e:
            raise CheckpointError(
                f"from_pretrained: {where}: config.json describes a {kind} model tinytensor "
                f"cannot build: {e}"
            ) from None
        _assign(model, weights, where)
        return model.eval()

    def save_pretrained(self, path) -> None:
        """Writes config.json and model.safetensors in HF's naming (transformers loads them)."""
        save_checkpoint(path, self.config.to_hf(), state_to_hf(self))


# HF activation names -> nn.FeedForward's
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
_ACTIVATIONS_BACK = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}


def activation_from_hf(name: str, field: str = "activation_function") -> str:
    """nn's activation name for HF's; `field` names the config entry in the error."""
    if name not in _ACTIVATIONS:
        raise CheckpointError(
            f"from_pretrained: config {field}={name!r} is not supported "
            f"(supported: {sorted(_ACTIVATIONS)})"
        )
    return _ACTIVATIONS[name]


def unsupported(config: dict, field: str, supported, model: str) -> None:
    """Raises when `config[field]` is set to a value other than `supported` (a tuple of values
    our model implements), instead of loading a model that computes something else."""
    if field in config and config[field] not in supported:
        raise CheckpointError(
            f"from_pretrained: {model} config {field}={config[field]!r} is not supported "
            f"(only {' or '.join(map(repr, supported))})"
        )


def activation_to_hf(name: str) -> str:
    return _ACTIVATIONS_BACK[name]
