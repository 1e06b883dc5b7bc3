"""Containers, as PyTorch's: `ModuleList`, `Sequential`, `ModuleDict`, `ParameterList`,
`ParameterDict`.

Each holds its parts in one private list or dict and tells `Module` about them by overriding
`_all_children` (submodules) or `_own_parameters`, so parameter names and state_dict keys are
PyTorch's: `h.0.attn.weight` for a list, `transformer.wte.weight` for a dict.

The dict-like containers (and Sequential built from an OrderedDict) also answer attribute access
by key, as PyTorch's do: `self.transformer.wte` for `transformer = nn.ModuleDict(dict(wte=...))`.
That is the one `__getattr__` in nn, and it only looks up the container's own keys: a misspelt
name raises AttributeError listing the keys there are. Assigning `container.key = module` stores
it under that key, as in PyTorch.
"""

from __future__ import annotations

from collections import OrderedDict

from tinytensor.tensor import Tensor

from .module import Module
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


def _parameters_repr(container, items):
    lines = [f"  ({k}): Parameter of shape {tuple(p.shape)}, {p.dtype}" for k, p in items]
    if not lines:
        return f"{type(container).__name__}()"
    return "\n".join([f"{type(container).__name__}(", *lines, ")"])


class _KeyedAttributes:
    """Attribute access to a container's keys: `__getattr__` (only reached when normal lookup
    fails) reads the key, `__setattr__` of a part stores it under the key.

    Subclasses set `_parts_attr` (the name of their dict) and `_is_part(value)`."""

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
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        parts = self.__dict__.get(self._parts_attr)
        if parts is not None and name in parts:
            del self[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get(self._parts_attr, ())))


class _ListContainer(Module):
    """The list protocol of ModuleList and ParameterList over one private list, `_list`.

    Subclasses set `_checked(value)`: the value to store (checked, or wrapped as a Parameter).
    """

    def __init__(self, values=None):
        super().__init__()
        self._list = []
        if values is not None:
            self.extend(values)

    def _checked(self, value):
        raise NotImplementedError

    def append(self, value):
        self._list.append(self._checked(value))
        return self

    def extend(self, values):
        for value in values:
            self.append(value)
        return self

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(self._list[index])
        return self._list[index]

    def __setitem__(self, index, value):
        self._list[index] = self._checked(value)

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def __iadd__(self, values):
        return self.extend(values)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__} has no forward(); iterate over it instead"
        )


class ModuleList(_ListContainer):
    """A list of modules, registered under their indices (`layers.0.weight`).

    Example:
        >>> layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        >>> [name for name, _ in layers.named_parameters()]
        ['0.weight', '0.bias', '1.weight', '1.bias']
    """

    def __init__(self, modules=None):
        super().__init__(modules)

    def _checked(self, module):
        return _check_module(type(self).__name__, module)

    def _all_children(self):
        return ((str(i), m) for i, m in enumerate(self._list))

    def _own_parameters(self):
        return iter(())

    def insert(self, index: int, module: Module) -> None:
        self._list.insert(index, self._checked(module))

    def __delitem__(self, index):
        del self._list[index]  # later modules are renumbered, as in PyTorch

    def __add__(self, other):
        return ModuleList([*self._list, *other])


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
        self._modules = {}
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self[key] = module
        else:
            for module in args:
                self.append(module)

    def _all_children(self):
        return iter(self._modules.items())

    def _own_parameters(self):
        return iter(())

    def __setitem__(self, key, module):
        if isinstance(key, int):  # replace the module at a position, keeping its name
            key = self._key_at(key)
        _check_key("Sequential", key)
        self._modules[key] = _check_module("Sequential", module)

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
        self._modules = {str(i): m for i, m in enumerate(modules)}
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x


class _DictContainer(_KeyedAttributes, Module):
    """The mapping protocol of ModuleDict and ParameterDict over one private dict, `_dict`, in
    insertion order; keys are also attributes (see `_KeyedAttributes`).

    Subclasses set `_is_part(value)` and `_checked(value)`: the value to store (checked, or
    wrapped as a Parameter).
    """

    _parts_attr = "_dict"

    def __init__(self, values=None):
        super().__init__()
        self._dict = {}
        if values is not None:
            self.update(values)

    def _checked(self, value):
        raise NotImplementedError

    def __setitem__(self, key: str, value):
        _check_key(type(self).__name__, key)
        self._dict[key] = self._checked(value)

    def __getitem__(self, key: str):
        return self._dict[key]

    def __delitem__(self, key: str):
        del self._dict[key]

    def __contains__(self, key) -> bool:
        return key in self._dict

    def __len__(self):
        return len(self._dict)

    def __iter__(self):
        return iter(self._dict)

    def keys(self):
        return self._dict.keys()

    def values(self):
        return self._dict.values()

    def items(self):
        return self._dict.items()

    def update(self, values) -> None:
        for key, value in _items(type(self).__name__, values):
            self[key] = value

    def pop(self, key: str):
        return self._dict.pop(key)

    def clear(self) -> None:
        self._dict.clear()

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

    def __init__(self, modules=None):
        super().__init__(modules)

    def _is_part(self, value):
        return isinstance(value, Module)

    def _checked(self, module):
        return _check_module(type(self).__name__, module)

    def _all_children(self):
        return iter(self._dict.items())

    def _own_parameters(self):
        return iter(())


class ParameterList(_ListContainer):
    """A list of Parameters, registered under their indices (`weights.0`). Tensors put in are
    wrapped as Parameters, as in PyTorch.

    Example:
        >>> ws = nn.ParameterList([nn.Parameter(tt.randn(2, 2)) for _ in range(3)])
        >>> [name for name, _ in ws.named_parameters()]
        ['0', '1', '2']
    """

    def _checked(self, value):
        return _as_parameter(type(self).__name__, value)

    def _own_parameters(self):
        return ((str(i), p) for i, p in enumerate(self._list))

    def _all_children(self):
        return iter(())

    def __repr__(self):
        return _parameters_repr(self, enumerate(self._list))


class ParameterDict(_DictContainer):
    """A dict of Parameters, registered under their keys (`scales.alpha`), in insertion order;
    `pd["alpha"]` and `pd.alpha` both work. Tensors put in are wrapped as Parameters."""

    def __init__(self, parameters=None):
        super().__init__(parameters)

    def _is_part(self, value):
        return isinstance(value, Tensor)

    def _checked(self, value):
        return _as_parameter(type(self).__name__, value)

    def _own_parameters(self):
        return iter(self._dict.items())

    def _all_children(self):
        return iter(())

    def get(self, key: str, default=None):
        return self._dict.get(key, default)

    def __repr__(self):
        return _parameters_repr(self, self._dict.items())
