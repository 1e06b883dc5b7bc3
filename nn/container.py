"""Containers, as PyTorch's: `ModuleList`, `Sequential`, `ModuleDict`, `ParameterList`,
`ParameterDict`.

Each keeps its parts where torch's does, in the Module registries: submodules in `_modules`
(under "0", "1", ... for a list), parameters in `_parameters`, so parameter names and state_dict
keys are PyTorch's (`h.0.attn.weight` for a list, `transformer.wte.weight` for a dict) and code
that walks `_modules` sees them.

The dict-like containers (and Sequential built from an OrderedDict) also answer attribute access
by key, as PyTorch's do: `self.transformer.wte` for `transformer = nn.ModuleDict(dict(wte=...))`.
A misspelt name raises AttributeError listing the keys there are (their `__getattr__` is only
reached then: the keys are plain attributes, see module.py). Assigning `container.key = module`
stores it under that key, as in PyTorch.
"""

from __future__ import annotations

import operator
from collections import OrderedDict

from tinytensor.tensor import Tensor

from .module import Module, _addindent
from .parameter import Parameter


def _check_key(container, key):
    if not isinstance(key, str) or not key or "." in key:
        raise KeyError(f"{container}: keys must be non-empty strings without '.', got {key!r}")


def _check_module(container, module):
    if not isinstance(module, Module):
        raise TypeError(f"{container}: expected a Module, got {type(module).__name__}")
    return module


def _as_parameter(container, value):
    """PyTorch's rule: a plain Tensor put into a parameter container becomes a Parameter."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"{container}: expected a Parameter or Tensor, got {type(value).__name__}")


def _items(container, values):
    """(key, value) pairs from a mapping (in its order) or an iterable of pairs."""
    if hasattr(values, "items"):
        return list(values.items())
    pairs = []
    for pair in values:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(
                f"{container}: expected a mapping or (key, value) pairs, got an element {pair!r}"
            )
        pairs.append(tuple(pair))
    return pairs


def _abs_index(container, index, length):
    index = operator.index(index)
    if not -length <= index < length:
        raise IndexError(
            f"{type(container).__name__}: index {index} is out of range for {length} entries"
        )
    return index + length if index < 0 else index


def _tensor_line(key, p, type_name):
    """torch's line for one entry of a ParameterList/ParameterDict repr."""
    size = "x".join(str(s) for s in p.shape)
    device = f" ({p.device})" if p.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{type_name} of size {size}{device}]"


class _KeyedAttributes:
    """Attribute access to a container's keys: `__getattr__` (only reached when normal lookup
    fails) names the keys there are, `__setattr__` of a part stores it under the key.

    Subclasses set `_parts_attr` (the registry holding their parts) and `_is_part(value)`."""

    _parts_attr = ""

    def _is_part(self, value) -> bool:
        raise NotImplementedError

    def __getattr__(self, name):
        parts = self.__dict__.get(self._parts_attr)
        if parts is not None and name in parts:
            return parts[name]
        keys = ", ".join(parts) if parts else "none"
        raise AttributeError(
            f"'{type(self).__name__}' object has no attribute or key {name!r} (keys: {keys})"
        )

    def __setattr__(self, name, value):
        parts = self.__dict__.get(self._parts_attr)
        if parts is not None and not name.startswith("_") and self._is_part(value):
            self[name] = value
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name):
        parts = self.__dict__.get(self._parts_attr)
        if parts is not None and name in parts:
            del self[name]
        else:
            super().__delattr__(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get(self._parts_attr, ())))


class ModuleList(Module):
    """A list of modules, registered under their indices (`layers.0.weight`).

    Example:
        >>> layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        >>> [name for name, _ in layers.named_parameters()]
        ['0.weight', '0.bias', '1.weight', '1.bias']
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _key(self, index):
        return str(_abs_index(self, index, len(self._modules)))

    def _renumber(self, modules):
        self._modules.clear()
        for i, module in enumerate(modules):
            self._modules[str(i)] = module

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), _check_module("ModuleList", module))
        return self

    def extend(self, modules) -> ModuleList:
        if not hasattr(modules, "__iter__"):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, _check_module("ModuleList", module))
        self._renumber(modules)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._modules.values())[index])
        return self._modules[self._key(index)]

    def __setitem__(self, index, module):
        self.add_module(self._key(index), _check_module("ModuleList", module))

    def __delitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[_abs_index(self, index, len(modules))]
        self._renumber(modules)  # later modules are renumbered, as in PyTorch

    def pop(self, index) -> Module:
        module = self[index]
        del self[index]
        return module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList([*self._modules.values(), *other])

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__} has no forward(); iterate over it instead"
        )

    def __repr__(self):
        """torch's: runs of modules that print the same are shown once, as `(0-11): 12 x ...`."""
        reprs = [repr(module) for module in self]
        if not reprs:
            return self._get_name() + "()"
        runs = [[0, 0]]
        blocks = [reprs[0]]
        for i, r in enumerate(reprs[1:], 1):
            if r == blocks[-1]:
                runs[-1][1] += 1
                continue
            runs.append([i, i])
            blocks.append(r)
        lines = []
        for (start, end), block in zip(runs, blocks):
            line = f"({start}): {block}"
            if start != end:
                line = f"({start}-{end}): {end - start + 1} x {block}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class Sequential(_KeyedAttributes, Module):
    """Modules applied one after another, named by position or by the keys of an OrderedDict:

        nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))       # 0.weight, 2.weight
        nn.Sequential(OrderedDict(fc=nn.Linear(4, 8), act=nn.ReLU()))    # fc.weight; seq.fc

    Indexing by position (`seq[0]`, `seq[-1]`, `seq[1:]`) works with either.
    """

    _parts_attr = "_modules"

    def _is_part(self, value):
        return isinstance(value, Module)

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self[key] = module
        else:
            for module in args:
                self.append(module)

    def __setitem__(self, key, module):
        if isinstance(key, int):  # replace the module at a position, keeping its name
            key = self._key_at(key)
        _check_key("Sequential", key)
        self.add_module(key, _check_module("Sequential", module))

    def _key_at(self, index):
        keys = list(self._modules)
        if not -len(keys) <= index < len(keys):
            raise IndexError(f"Sequential: index {index} is out of range for {len(keys)} modules")
        return keys[index]

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        if isinstance(index, str):
            return self._modules[index]
        return self._modules[self._key_at(index)]

    def __delitem__(self, index):
        if isinstance(index, slice):
            for key in list(self._modules)[index]:
                del self._modules[key]
        else:
            del self._modules[index if isinstance(index, str) else self._key_at(index)]

    def append(self, module: Module) -> Sequential:
        self[str(len(self._modules))] = module
        return self

    def extend(self, modules) -> Sequential:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Inserts before position `index`; positional names are renumbered (as PyTorch)."""
        modules = list(self._modules.values())
        modules.insert(index, _check_module("Sequential", module))
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m
        return self

    def pop(self, index) -> Module:
        module = self[index]
        del self[index]
        return module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x


class _DictContainer(_KeyedAttributes, Module):
    """The mapping protocol of ModuleDict and ParameterDict over their registry (`_parts_attr`),
    in insertion order; keys are also attributes (see `_KeyedAttributes`).

    Subclasses set `_is_part(value)` and `_checked(value)`: the value to store (checked, or
    wrapped as a Parameter).
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.update(values)

    @property
    def _parts(self):
        return self.__dict__[self._parts_attr]

    def _checked(self, value):
        raise NotImplementedError

    def _register(self, key, value):
        raise NotImplementedError

    def __setitem__(self, key: str, value):
        _check_key(type(self).__name__, key)
        # as torch's, through add_module / register_parameter: a key that names an attribute
        # of the container ("keys", "train") is a KeyError, and the registration hooks run
        self._register(key, self._checked(value))

    def __getitem__(self, key: str):
        return self._parts[key]

    def __delitem__(self, key: str):
        del self._parts[key]

    def __contains__(self, key) -> bool:
        return key in self._parts

    def __len__(self):
        return len(self._parts)

    def __iter__(self):
        return iter(self._parts)

    def keys(self):
        return self._parts.keys()

    def values(self):
        return self._parts.values()

    def items(self):
        return self._parts.items()

    def update(self, values) -> None:
        for key, value in _items(type(self).__name__, values):
            self[key] = value

    def pop(self, key: str):
        return self._parts.pop(key)

    def clear(self) -> None:
        self._parts.clear()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward(); index it instead")


class ModuleDict(_DictContainer):
    """A dict of modules, registered under their keys (`transformer.wte.weight`), in insertion
    order. `md["wte"]` and `md.wte` both work (a misspelt key raises AttributeError/KeyError).

    Example (nanoGPT's layout):
        >>> transformer = nn.ModuleDict(dict(wte=nn.Embedding(10, 4), ln_f=nn.LayerNorm(4)))
        >>> transformer.wte.weight.shape
        (10, 4)
    """

    _parts_attr = "_modules"

    def __init__(self, modules=None):
        super().__init__(modules)

    def _is_part(self, value):
        return isinstance(value, Module)

    def _checked(self, module):
        return _check_module(type(self).__name__, module)

    def _register(self, key, module):
        self.add_module(key, module)


class ParameterList(Module):
    """A list of Parameters, registered under their indices (`weights.0`). Tensors put in are
    wrapped as Parameters, as in PyTorch.

    Example:
        >>> ws = nn.ParameterList([nn.Parameter(tt.randn(2, 2)) for _ in range(3)])
        >>> [name for name, _ in ws.named_parameters()]
        ['0', '1', '2']
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def append(self, value):
        self.register_parameter(str(len(self._parameters)), _as_parameter("ParameterList", value))
        return self

    def extend(self, values):
        for value in values:
            self.append(value)
        return self

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._parameters.values())[index])
        return self._parameters[str(_abs_index(self, index, len(self._parameters)))]

    def __setitem__(self, index, value):
        key = str(_abs_index(self, index, len(self._parameters)))
        self.register_parameter(key, _as_parameter("ParameterList", value))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__} has no forward(); iterate over it instead"
        )

    def extra_repr(self):
        return "\n".join(_tensor_line(k, p, f"torch.{p.dtype}") for k, p in enumerate(self))


class ParameterDict(_DictContainer):
    """A dict of Parameters, registered under their keys (`scales.alpha`), in insertion order;
    `pd["alpha"]` and `pd.alpha` both work. Tensors put in are wrapped as Parameters."""

    _parts_attr = "_parameters"

    def __init__(self, parameters=None):
        super().__init__(parameters)

    def _is_part(self, value):
        return isinstance(value, Tensor)

    def _checked(self, value):
        return _as_parameter(type(self).__name__, value)

    def _register(self, key, param):
        self.register_parameter(key, param)

    def get(self, key: str, default=None):
        return self._parameters.get(key, default)

    def extra_repr(self):
        return "\n".join(_tensor_line(k, p, p.type()) for k, p in self.items())
