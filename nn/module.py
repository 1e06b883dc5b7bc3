"""`Module`: the base class of every layer and model, and the containers built on it.

A Module finds its parts by walking its own attributes (`vars(self)`), in assignment order:

- a `Parameter` attribute is a parameter (a plain Tensor is not: it is neither trained nor saved);
- a `Module` attribute is a submodule, and so is every Module (or Parameter) inside a list, tuple
  or dict attribute, named `blocks.0`, `blocks.1`, ... or `heads.<key>`;
- buffers (running statistics, fixed tables) are Tensors registered by name with
  `register_buffer(name, tensor, persistent=True)`; non-persistent ones are moved by `to()` but
  not saved in `state_dict()`.

There is no `__getattr__`: a misspelt attribute raises AttributeError as on any Python object.

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)
        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

    model = MLP()
    [name for name, _ in model.named_parameters()]  # ['fc1.weight', 'fc1.bias', 'fc2.weight', ...]
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

from tinytensor import dtypes
from tinytensor.backend import Device, get_array_module, move_array
from tinytensor.function import module_scope
from tinytensor.tensor import Tensor

from .parameter import Parameter

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _is_container_of_parts(value) -> bool:
    items = value.values() if isinstance(value, dict) else value
    return any(isinstance(v, (Module, Parameter)) for v in items)


def _container_items(value):
    """(name, item) pairs of a list/tuple/dict attribute: indices or keys as names."""
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()]
    return [(str(i), v) for i, v in enumerate(value)]


class Module:
    """Base class of layers and models: subclass it, set parts as attributes, write `forward`.

    Calling the module runs `forward` inside `tinytensor.function.module_scope(self)`, so every
    graph node created there records the innermost running module in `ctx.module` (graph
    drawing groups nodes by it).
    """

    # Class-level defaults, so that a subclass that forgets `super().__init__()` still works.
    training = True
    _buffer_names: tuple = ()  # registered buffer names, in registration order
    _non_persistent: frozenset = frozenset()  # buffer names left out of state_dict

    def __init__(self):
        self.training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *args, **kwargs):
        with module_scope(self):
            return self.forward(*args, **kwargs)

    # ---- registration ---------------------------------------------------------------------

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Adds a Tensor that is part of the module's state but not trained (e.g. running
        statistics). It is set as the attribute `name`; `persistent=False` leaves it out of
        `state_dict()` (tables recomputed at construction, such as RoPE's cos/sin)."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"register_buffer: invalid buffer name {name!r}")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}"
            )
        if isinstance(tensor, Parameter):
            raise TypeError(f"register_buffer: {name!r} is a Parameter; assign it as an attribute")
        if name in vars(self) and name not in self._buffer_names:
            raise KeyError(f"register_buffer: attribute {name!r} already exists")
        if name not in self._buffer_names:
            self._buffer_names = (*self._buffer_names, name)
        non_persistent = set(self._non_persistent) - {name}
        if not persistent:
            non_persistent.add(name)
        self._non_persistent = frozenset(non_persistent)
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Same as `setattr(self, name, param)`; kept for PyTorch code that calls it."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None")
        setattr(self, name, param)

    def add_module(self, name: str, module: Module | None) -> None:
        setattr(self, name, module)

    # ---- walking the tree -----------------------------------------------------------------

    def _own_parameters(self):
        """(name, Parameter) directly held by this module (not by submodules)."""
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield name, value
            elif isinstance(value, (list, tuple, dict)) and _is_container_of_parts(value):
                for key, item in _container_items(value):
                    if isinstance(item, Parameter):
                        yield f"{name}.{key}", item

    def named_children(self):
        """(name, Module) for the direct submodules, in attribute order (each module once)."""
        seen = set()
        for name, child in self._all_children():
            if id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def _all_children(self):
        """(name, Module) for every attribute holding a submodule, repeats included."""
        for name, value in vars(self).items():
            if isinstance(value, Module):
                items = [(name, value)]
            elif isinstance(value, (list, tuple, dict)) and _is_container_of_parts(value):
                items = [
                    (f"{name}.{key}", item)
                    for key, item in _container_items(value)
                    if isinstance(item, Module)
                ]
            else:
                continue
            yield from items

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "", memo: set | None = None):
        """(dotted name, Module) for this module ('') and every submodule, pre-order, each once."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """(dotted name, Parameter) pairs; a parameter shared by several modules is listed once,
        under the first name found."""
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, module in modules:
            for name, p in module._own_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{module_name}.{name}" if module_name else name), p

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def _own_buffers(self):
        for name in self._buffer_names:
            value = getattr(self, name)
            if value is not None:
                yield name, value

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, module in modules:
            for name, b in module._own_buffers():
                if id(b) not in seen:
                    seen.add(id(b))
                    yield (f"{module_name}.{name}" if module_name else name), b

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self) -> int:
        """Number of scalar weights (shared parameters counted once)."""
        return sum(p.numel() for p in self.parameters())

    # ---- state ----------------------------------------------------------------------------

    def _state_items(self):
        """(dotted name, Tensor) for every parameter and persistent buffer, as PyTorch's
        state_dict: a tied parameter appears under each of its names."""
        yield from self._state_items_under("", set())

    def _state_items_under(self, prefix, visiting):
        # Unlike named_modules, a module reachable under two names is walked under both.
        if id(self) in visiting:  # a module holding its ancestor: stop, as named_modules does
            return
        visiting.add(id(self))
        for name, p in self._own_parameters():
            yield prefix + name, p
        for name, b in self._own_buffers():
            if name not in self._non_persistent:
                yield prefix + name, b
        for name, child in self._all_children():
            yield from child._state_items_under(f"{prefix}{name}.", visiting)
        visiting.discard(id(self))

    def state_dict(self) -> OrderedDict:
        """Parameters and persistent buffers by dotted name, as Tensors sharing the module's
        arrays (detached: no gradient, no graph). Save with `tt.save(model.state_dict(), path)`."""
        return OrderedDict((name, t.detach()) for name, t in self._state_items())

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copies `state_dict` (name -> Tensor or array) into the parameters and buffers in place.

        Every problem is reported at once, in one RuntimeError naming each key: missing keys and
        unexpected keys (only when `strict`), and keys whose shape differs (always). Nothing is
        copied when an error is raised. Values are cast to the parameter's dtype and device.

        Returns:
            (missing_keys, unexpected_keys), as PyTorch.
        """
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = []
        for key, target in own.items():
            if key in state_dict:
                shape = tuple(getattr(state_dict[key], "shape", ()))
                if shape != tuple(target.shape):
                    mismatched.append(
                        f"{key}: checkpoint shape {shape}, model shape {tuple(target.shape)}"
                    )
        problems = []
        if strict and missing:
            problems.append(f"missing keys ({len(missing)}): {', '.join(missing)}")
        if strict and unexpected:
            problems.append(f"unexpected keys ({len(unexpected)}): {', '.join(unexpected)}")
        if mismatched:
            problems.append(f"shape mismatches ({len(mismatched)}): " + "; ".join(mismatched))
        if problems:
            raise RuntimeError(
                f"load_state_dict for {type(self).__name__} failed:\n  " + "\n  ".join(problems)
            )
        for key, target in own.items():
            if key in state_dict:
                value = state_dict[key]
                array = value._array if isinstance(value, Tensor) else value
                array = move_array(get_array_module(array).asarray(array), target.device)
                target._array[...] = array.astype(target.dtype, copy=False)
        return IncompatibleKeys(missing, unexpected)

    # ---- modes, devices, gradients ------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Sets `training` on this module and every submodule (dropout, batch norm use it)."""
        for module in self.modules():
            module.training = bool(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears `.grad` of every parameter (to None by default, as PyTorch 2)."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad._array[...] = 0

    def to(self, *args, dtype=None, device=None) -> Module:
        """`model.to("cuda")`, `model.to(tt.float64)`: moves/casts parameters and buffers IN
        PLACE (the same Parameter objects get new arrays), so an optimizer created before keeps
        valid references. Only floating-point tensors change dtype (as PyTorch)."""
        for a in args:
            if isinstance(a, (str, Device)):
                device = a
            else:
                dtype = a
        dtype = dtypes.to_dtype(dtype)
        if dtype is not None and dtype.kind != "f":
            raise TypeError(f"Module.to: only floating dtypes are allowed, got {dtype}")
        device = Device(device) if device is not None else None
        seen = set()
        for module in self.modules():
            tensors = [p for _, p in module._own_parameters()] + [
                b for _, b in module._own_buffers()
            ]
            for t in tensors:
                if id(t) in seen:
                    continue
                seen.add(id(t))
                for holder in (t, t.grad):
                    if holder is None:
                        continue
                    if device is not None:
                        holder._array = move_array(holder._array, device)
                    if dtype is not None and holder.dtype.kind == "f":
                        holder._array = holder._array.astype(dtype)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self) -> Module:
        return self.to("cuda")

    def float(self) -> Module:
        return self.to(dtypes.float32)

    def double(self) -> Module:
        return self.to(dtypes.float64)

    def half(self) -> Module:
        return self.to(dtypes.float16)

    def apply(self, fn) -> Module:
        """Calls `fn(module)` on every submodule (children first) and then on self, e.g. for a
        custom weight initialization."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- printing -------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The layer's settings, shown inside the parentheses of its repr."""
        return ""

    def __repr__(self):
        children = list(self.named_children())
        extra = self.extra_repr()
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = [f"{type(self).__name__}("] + ([f"  {extra}"] if extra else [])
        for name, child in children:
            count = child.num_parameters()
            text = repr(child).replace("\n", "\n  ")
            leaf = not any(True for _ in child.children())  # a parent's repr ends with its count
            lines.append(
                f"  ({name}): {text}" + (f"  # {count:,} params" if count and leaf else "")
            )
        total = self.num_parameters()
        return "\n".join(lines) + f"\n)  # {total:,} params"


class ModuleList(Module):
    """A list of modules whose parameters are registered, named by index (`layers.0.weight`)."""

    def __init__(self, modules=()):
        super().__init__()
        self._list = []
        self.extend(modules)

    def _all_children(self):
        return ((str(i), m) for i, m in enumerate(self._list))

    def _own_parameters(self):
        return iter(())

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(
                f"{type(self).__name__}: expected a Module, got {type(module).__name__}"
            )
        self._list.append(module)
        return self

    def extend(self, modules) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(self._list[index])
        return self._list[index]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it instead")


class Sequential(ModuleList):
    """Modules applied one after another: `Sequential(Linear(4, 8), ReLU(), Linear(8, 2))`."""

    def __init__(self, *modules):
        super().__init__(modules)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(*self._list[index])
        return self._list[index]

    def forward(self, x):
        for module in self._list:
            x = module(x)
        return x


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys (`heads.cls.weight`)."""

    def __init__(self, modules=None):
        super().__init__()
        self._dict = {}
        for key, m in dict(modules or {}).items():
            self[key] = m

    def _all_children(self):
        return iter(self._dict.items())

    def _own_parameters(self):
        return iter(())

    def __setitem__(self, key: str, module: Module):
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: expected a Module, got {type(module).__name__}")
        if not isinstance(key, str) or "." in key:
            raise KeyError(f"ModuleDict: keys must be strings without '.', got {key!r}")
        self._dict[key] = module

    def __getitem__(self, key: str) -> Module:
        return self._dict[key]

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

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it instead")
