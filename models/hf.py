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

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"

_INDEX = re.compile(r"(?<=\.)\d+(?=\.)")  # a layer index between dots: "blocks.3.attn" -> 3


# ---- files --------------------------------------------------------------------------------------


class CheckpointError(OSError):
    """A checkpoint folder is missing, incomplete or unreadable (the message names the path)."""


def read_config(path) -> dict:
    """The parsed `config.json` of a checkpoint folder."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise CheckpointError(f"from_pretrained: no checkpoint folder at {path!r}")
    file = os.path.join(path, CONFIG_NAME)
    if not os.path.isfile(file):
        raise CheckpointError(f"from_pretrained: {path!r} has no {CONFIG_NAME}")
    try:
        with open(file, encoding="utf-8") as f:
            config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"from_pretrained: {file!r} is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"from_pretrained: {file!r} does not hold a JSON object")
    return config


def _load_safetensors_file(file) -> dict:
    """{name: numpy array}; bfloat16 tensors come back as float32."""
    try:
        from tinytensor.serialization import load_safetensors
    except (ImportError, AttributeError):
        load_safetensors = None
    try:
        if load_safetensors is not None:
            return dict(load_safetensors(file))
        from safetensors.numpy import load_file

        return load_file(file)
    except Exception as e:  # safetensors raises its own error types (SafetensorError, ...)
        raise CheckpointError(f"from_pretrained: cannot read {file!r}: {e}") from None


def load_weights(path) -> dict:
    """All tensors of a checkpoint folder (single file or shards) as {HF name: numpy array}."""
    path = os.fspath(path)
    single = os.path.join(path, WEIGHTS_NAME)
    index = os.path.join(path, WEIGHTS_INDEX_NAME)
    if os.path.isfile(single):
        return _load_safetensors_file(single)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        weights = {}
        for shard in shards:
            weights.update(_load_safetensors_file(os.path.join(path, shard)))
        return weights
    present = sorted(os.listdir(path)) if os.path.isdir(path) else []
    hint = (
        " (only PyTorch pickles: convert them to safetensors with transformers first)"
        if any(name.endswith((".bin", ".pt", ".pth")) for name in present)
        else ""
    )
    raise CheckpointError(
        f"from_pretrained: {path!r} has no {WEIGHTS_NAME} or {WEIGHTS_INDEX_NAME}{hint}; "
        f"found {present}"
    )


def save_checkpoint(path, config: dict, weights: dict) -> None:
    """Writes `config.json` and `model.safetensors` (float arrays, contiguous) into `path`."""
    from safetensors.numpy import save_file

    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    arrays = {name: np.ascontiguousarray(a) for name, a in weights.items()}
    # NOTE: transformers refuses safetensors files whose metadata lacks format="pt"
    save_file(arrays, os.path.join(path, WEIGHTS_NAME), metadata={"format": "pt"})


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


def state_from_hf(model, weights: dict, path="<weights>") -> dict:
    """Picks and reshapes the HF tensors for every parameter of `model`: {our name: array}.

    Accepts names with or without the model's base prefix (`model.HF_PREFIX`). Transposes the
    parameters listed in `model.HF_TRANSPOSED` (GPT-2's Conv1D stores (in, out)). HF tensors
    that are tied copies of one of ours (`model.HF_TIED`, e.g. "lm_head.weight") or buffers
    (`model.HF_IGNORED` patterns) are dropped; anything else unexpected is an error, so that a
    wrong mapping can never load silently.
    """
    prefix = model.HF_PREFIX
    by_name = {}
    for name, array in weights.items():
        short = name[len(prefix) :] if prefix and name.startswith(prefix) else name
        by_name[short] = array
    state, used, missing = {}, set(), []
    for ours, param in _named_tensors(model):
        theirs, part, parts = hf_name(ours, model.HF_NAMES)
        if theirs not in by_name and model.HF_TIED_SOURCES.get(theirs) in by_name:
            theirs = model.HF_TIED_SOURCES[theirs]  # an untied model from a file that tied it
        if theirs not in by_name:
            missing.append(theirs)
            continue
        array = by_name[theirs]
        if parts > 1:
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
    state = state_from_hf(model, load_weights(path), path=repr(os.fspath(path)))
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
    if model_type in ARCHITECTURES:
        return model_type
    for arch in config.get("architectures") or []:
        for prefix, kind in _ARCHITECTURE_PREFIXES.items():
            if arch.startswith(prefix):
                return kind
    raise CheckpointError(
        f"from_pretrained: {path} describes model_type={model_type!r} "
        f"(architectures={config.get('architectures')}); tinytensor knows {sorted(ARCHITECTURES)}"
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
        """Builds the model from `path/config.json` and loads `path/model.safetensors`."""
        config = read_config(path)
        kind = architecture_of(config, repr(os.fspath(path)))
        if model_class(kind) is not cls:
            raise CheckpointError(
                f"{cls.__name__}.from_pretrained: {os.fspath(path)!r} holds a {kind!r} model; "
                "use tinytensor.models.from_pretrained to pick the class from the config"
            )
        model = cls(cls.config_class.from_hf(config))
        load_into(model, path)
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
