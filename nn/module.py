"""`Module`: the base class of every layer and model (the containers are in container.py).

A Module finds its parts by walking its own attributes (`vars(self)`), in assignment order:

- a `Parameter` attribute is a parameter (a plain Tensor is not: it is neither trained nor saved);
- a `Module` attribute is a submodule, and so is every Module (or Parameter) inside a list, tuple
  or dict attribute, named `blocks.0`, `blocks.1`, ... or `heads.<key>`;
- buffers (running statistics, fixed tables) are Tensors registered by name with
  `register_buffer(name, tensor, persistent=True)`; non-persistent ones are moved by `to()` but
  not saved in `state_dict()`.

There is no `__getattr__`: a misspelt attribute raises AttributeError as on any Python object.
Names and order are PyTorch's: per module its own parameters (in assignment order), then its
persistent buffers, then each submodule's, pre-order, so `state_dict()` keys match torch's for the
same structure.

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
from tinytensor.function import module_stack
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

    Calling the module runs `forward` with the module on `tinytensor.function.module_stack` (as
    `module_scope(self)` does), so every graph node created there records the innermost running
    module in `ctx.module` (graph drawing groups nodes by it).
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
        module_stack.append(self)  # what module_scope(self) does, without its object and calls
        try:
            if kwargs or len(args) != 1:
                return self.forward(*args, **kwargs)
            # NOTE: one positional argument (most calls) without star-args: 0.1 µs of 0.5
            return self.forward(args[0])
        finally:
            module_stack.pop()

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
        """Registers `module` as the submodule `name` (same as `setattr(self, name, module)`,
        which is how PyTorch code that builds layers in a loop names them)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(
                f"add_module: {name!r} must be a Module or None, got {type(module).__name__}"
            )
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(
                f"add_module: module name must be a non-empty string without '.', got {name!r}"
            )
        if name in vars(self) and not isinstance(vars(self)[name], (Module, type(None))):
            raise KeyError(f"add_module: attribute {name!r} already exists")
        setattr(self, name, module)

    def register_module(self, name: str, module: Module | None) -> None:
        """Alias of `add_module`, as PyTorch."""
        self.add_module(name, module)

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

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate=True):
        """(dotted name, Module) for this module ('') and every submodule, pre-order; a module
        reachable under several names is listed once unless remove_duplicate=False."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        children = self.named_children() if remove_duplicate else self._all_children()
        for name, child in children:
            child_prefix = f"{prefix}.{name}" if prefix else name
            yield from child.named_modules(memo, child_prefix, remove_duplicate)

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ('' is self), e.g. "transformer.h.0.attn"."""
        if target == "":
            return self
        module, parts = self, target.split(".")
        while parts:
            children = dict(module._all_children())
            # A list or dict attribute names its items "blocks.0": try the longest match first.
            for n in range(len(parts), 0, -1):
                name = ".".join(parts[:n])
                if name in children:
                    module, parts = children[name], parts[n:]
                    break
            else:
                what = "is not an nn.Module" if hasattr(module, parts[0]) else "does not exist"
                raise AttributeError(
                    f"get_submodule({target!r}): {type(module).__name__} has no submodule "
                    f"{parts[0]!r} (the attribute {what})"
                )
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The Parameter at dotted path `target`, e.g. "transformer.wte.weight"."""
        module_path, _, name = target.rpartition(".")
        params = dict(self.get_submodule(module_path)._own_parameters())
        if name not in params:
            raise AttributeError(f"get_parameter({target!r}): no parameter named {name!r}")
        return params[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path `target`."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._buffer_names:
            raise AttributeError(f"get_buffer({target!r}): no buffer named {name!r}")
        return getattr(module, name)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        """(dotted name, Parameter) pairs; a parameter shared by several modules is listed once,
        under the first name found (unless remove_duplicate=False)."""
        seen = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_name, module in modules:
            for name, p in module._own_parameters():
                if remove_duplicate and id(p) in seen:
                    continue
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

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        seen = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_name, module in modules:
            for name, b in module._own_buffers():
                if remove_duplicate and id(b) in seen:
                    continue
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

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name, as Tensors sharing the module's
        arrays (detached: no gradient, no graph; `keep_vars=True` gives the Parameters
        themselves). Keys get `prefix` in front; `destination` is a dict to fill. Save with
        `tt.save(model.state_dict(), path)`."""
        destination = OrderedDict() if destination is None else destination
        for name, t in self._state_items():
            destination[prefix + name] = t if keep_vars else t.detach()
        return destination

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
