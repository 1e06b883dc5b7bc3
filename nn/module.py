"""`Module`: the base class of every layer and model (the containers are in container.py), with
PyTorch's registration rules, hooks and state_dict protocol.

Registration is torch's `__setattr__`/`__delattr__`, attribute by attribute:

- a `Parameter` attribute is a parameter, a `Module` attribute a submodule, and a Tensor set by
  `register_buffer(name, tensor, persistent=True)` a buffer (persistent=False: moved by `to()`
  but not saved in `state_dict()`). Nothing else is registered: a plain Tensor attribute is
  neither trained nor saved, and a plain list or dict of Modules is NOT walked (its parameters are
  not in `parameters()` nor in `state_dict()`): use `nn.ModuleList` / `nn.ModuleDict` /
  `nn.ParameterList` / `nn.ParameterDict`, as in PyTorch;
- the registries are torch's dicts, `_parameters`, `_buffers`, `_modules` (and
  `_non_persistent_buffers_set`), in registration order, so names and order are PyTorch's: per
  module its own parameters, then its persistent buffers, then each submodule's, pre-order;
- assigning the wrong kind of value to a registered name is torch's TypeError naming it
  (`model.fc.weight = tensor` -> "cannot assign 'torch.FloatTensor' as parameter 'weight' ...").

NOTE: unlike torch, a registered value is also kept in the instance `__dict__` (the registries
write it there and remove it again), so `self.weight` in a forward is a plain attribute read and
Module needs no `__getattr__` (Python cannot specialize attribute reads on a class that has one:
each `self.x` would cost ~17 ns more, and a miss ~0.8 µs). A name that the class itself defines
(a method, a property) is not copied, so the class attribute wins, as in torch.

Hooks are torch's, each `register_*` returning a `RemovableHandle` (nn/hooks.py): forward pre-hooks
and forward hooks (prepend, with_kwargs, always_call) on a module or on all modules
(`register_module_forward_pre_hook` / `register_module_forward_hook`, which run first), and
state_dict / load_state_dict pre- and post-hooks; `get_extra_state`/`set_extra_state` travel in
the state_dict under `<prefix>_extra_state`. Calling a module without any hook runs `forward` at
once (one class-attribute test, `_call_hooks`, ahead of the call).

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

import functools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from types import MappingProxyType

from tinytensor import dtypes
from tinytensor.backend import Device, get_array_module, move_array
from tinytensor.function import module_stack
from tinytensor.tensor import Tensor

from .hooks import RemovableHandle
from .parameter import Parameter

__all__ = [
    "Module",
    "register_module_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_buffer_registration_hook",
    "register_module_module_registration_hook",
    "register_module_parameter_registration_hook",
]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: (missing_keys, unexpected_keys), printed as torch's."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
_EMPTY = MappingProxyType({})  # the class-level registries of a module before its __init__ ran
_MEMBER_DICTS = ("_parameters", "_buffers", "_modules")


def _addindent(s_, num_spaces):
    """torch's: indents every line but the first (blank lines stay empty)."""
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    s = [(num_spaces * " ") + line if line.strip() else "" for line in s]
    return first + "\n" + "\n".join(s)


def _typename(obj) -> str:
    """torch.typename: 'torch.FloatTensor' for a tensor, 'int', 'package.module.Class' else."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


# ---- the registries -------------------------------------------------------------------------


_MISSING = object()


def _shadowed(owner, name) -> bool:
    """Whether the class of `owner` defines `name` as a descriptor (a method, a property): such a
    name is found on the class before the instance `__dict__`, so it is not copied there."""
    attr = getattr(type(owner), name, _MISSING)
    return attr is not _MISSING and hasattr(type(attr), "__get__")


class _Members(dict):
    """A registry (`_parameters`, `_buffers`, `_modules`): a dict that also writes each entry
    into its module's `__dict__` (and removes it there), so attribute reads stay plain.

    Names the module's class defines as methods or properties are not copied (the class
    attribute wins, as in torch, whose values are only reached through `__getattr__`). A copy
    or pickle of the dict is a plain dict; `Module.__setstate__` wraps it again for the new
    module."""

    __slots__ = ("_owner",)

    def __init__(self, owner, items=()):
        dict.__init__(self)
        self._owner = weakref.ref(owner)
        for name, value in items:
            self[name] = value

    def _store(self):
        owner = self._owner()
        return None if owner is None else owner.__dict__

    def __setitem__(self, name, value):
        dict.__setitem__(self, name, value)
        owner = self._owner()
        if owner is not None and isinstance(name, str):
            if _shadowed(owner, name):
                owner.__dict__.pop(name, None)
            else:
                owner.__dict__[name] = value

    def __delitem__(self, name):
        dict.__delitem__(self, name)
        store = self._store()
        if store is not None and isinstance(name, str):
            store.pop(name, None)

    _missing = object()

    def pop(self, name, default=_missing):
        if name in self:
            value = dict.__getitem__(self, name)
            del self[name]
            return value
        if default is _Members._missing:
            raise KeyError(name)
        return default

    def popitem(self):
        name, value = dict.popitem(self)
        store = self._store()
        if store is not None and isinstance(name, str):
            store.pop(name, None)
        return name, value

    def clear(self):
        for name in list(self):
            del self[name]

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return dict.__getitem__(self, name)

    def update(self, *args, **kwargs):
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def __ior__(self, other):
        self.update(other)
        return self

    def copy(self):
        return dict(self)

    def __reduce_ex__(self, protocol):
        return (dict, (dict(self),))


def _init_registries(module):
    d = module.__dict__
    if "_parameters" not in d:
        d["_parameters"] = _Members(module)
        d["_buffers"] = _Members(module)
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = _Members(module)
    return d["_parameters"]


def _hook_dict(module, attr):
    """The module's own OrderedDict of hooks named `attr` (created at the first registration)."""
    hooks = module.__dict__.get(attr)
    if hooks is None:
        hooks = module.__dict__[attr] = OrderedDict()
    return hooks


# ---- hooks common to all modules (torch.nn.modules.module's) --------------------------------

_global_buffer_registration_hooks: dict = OrderedDict()
_global_module_registration_hooks: dict = OrderedDict()
_global_parameter_registration_hooks: dict = OrderedDict()
_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()
_global_forward_hooks_always_called: dict = OrderedDict()
_global_forward_hooks_with_kwargs: dict = OrderedDict()


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """A forward pre-hook on every module, `hook(module, args) -> None or new args`, run before
    the module's own pre-hooks (debugging and profiling: it is global state)."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    Module._call_hooks = True
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False) -> RemovableHandle:
    """A forward hook on every module, `hook(module, args, output) -> None or new output`
    (`hook(module, args, kwargs, output)` with_kwargs), run before the module's own hooks;
    always_call: also when forward raised."""
    handle = RemovableHandle(
        _global_forward_hooks,
        extra_dict=[_global_forward_hooks_always_called, _global_forward_hooks_with_kwargs],
    )
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    Module._call_hooks = True
    return handle


def register_module_buffer_registration_hook(hook) -> RemovableHandle:
    """`hook(module, name, buffer) -> None or new buffer`, run by every register_buffer."""
    handle = RemovableHandle(_global_buffer_registration_hooks)
    _global_buffer_registration_hooks[handle.id] = hook
    return handle


def register_module_module_registration_hook(hook) -> RemovableHandle:
    """`hook(module, name, submodule) -> None or new submodule`, run by every registration."""
    handle = RemovableHandle(_global_module_registration_hooks)
    _global_module_registration_hooks[handle.id] = hook
    return handle


def register_module_parameter_registration_hook(hook) -> RemovableHandle:
    """`hook(module, name, param) -> None or new param`, run by every register_parameter."""
    handle = RemovableHandle(_global_parameter_registration_hooks)
    _global_parameter_registration_hooks[handle.id] = hook
    return handle


def _registered(hooks, module, name, value):
    """value after the global registration hooks, each of which may replace it (torch's)."""
    for hook in hooks.values():
        output = hook(module, name, value)
        if output is not None:
            value = output
    return value


class _WrappedHook:
    """A load_state_dict pre-hook that gets its module (held weakly) as first argument."""

    def __init__(self, hook, module=None):
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = False
        if module is not None:
            self.module = weakref.ref(module)
            self.with_module = True

    def __call__(self, *args, **kwargs):
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self):
        state = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            state["module"] = self.module()
        return state

    def __setstate__(self, state):
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


class _LoadPlan:
    """The copies of one load_state_dict call, made only once every module was checked: a
    checkpoint with a wrong shape or a missing key changes nothing."""

    def __init__(self):
        self.steps = []  # callables
        self.mismatched = []  # the shape-mismatch messages (also in error_msgs)


_load_plans: list = []  # the plan of the load_state_dict running now (innermost last)


# ---- Module ---------------------------------------------------------------------------------


class Module:
    """Base class of layers and models: subclass it, set parts as attributes, write `forward`.

    Calling the module runs `forward` with the module on `tinytensor.function.module_stack` (as
    `module_scope(self)` does), so every graph node created there records the innermost running
    module in `ctx.module` (graph drawing groups nodes by it); its forward hooks run there too.
    """

    # Class-level defaults, so that a subclass that forgets `super().__init__()` still works
    # (torch raises at its first registration instead); the registries are made at first use.
    training = True
    _parameters = _EMPTY
    _buffers = _EMPTY
    _modules = _EMPTY
    _non_persistent_buffers_set = frozenset()
    _forward_pre_hooks = _EMPTY
    _forward_pre_hooks_with_kwargs = _EMPTY
    _forward_hooks = _EMPTY
    _forward_hooks_with_kwargs = _EMPTY
    _forward_hooks_always_called = _EMPTY
    _state_dict_hooks = _EMPTY
    _state_dict_pre_hooks = _EMPTY
    _load_state_dict_pre_hooks = _EMPTY
    _load_state_dict_post_hooks = _EMPTY
    # True on a module with forward (pre-)hooks, and on the class while a global one exists:
    # __call__'s only test. _call_impl clears it again once the hooks are gone.
    _call_hooks = False
    _version: int = 1
    dump_patches: bool = False
    call_super_init: bool = False

    def __init__(self, *args, **kwargs):
        if self.call_super_init is False and kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                f"'{next(iter(kwargs))}'"
            )
        if self.call_super_init is False and args:
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument but "
                f"{len(args) + 1} were given"
            )
        self.__dict__["training"] = True
        _init_registries(self)
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        if self._call_hooks:
            return self._call_impl(*args, **kwargs)
        module_stack.append(self)  # what module_scope(self) does, without its object and calls
        try:
            if kwargs or len(args) != 1:
                return self.forward(*args, **kwargs)
            # NOTE: one positional argument (most calls) without star-args: 0.1 µs of 0.5
            return self.forward(args[0])
        finally:
            module_stack.pop()

    def _call_impl(self, *args, **kwargs):
        """The call with hooks, as torch's _call_impl: global forward pre-hooks, then the
        module's (prepend puts one first); forward; global forward hooks, then the module's; on
        an exception, the always_call forward hooks that did not run yet, then the re-raise."""
        forward_call = self.forward
        if not (
            self._forward_pre_hooks
            or self._forward_hooks
            or _global_forward_pre_hooks
            or _global_forward_hooks
        ):
            self.__dict__.pop("_call_hooks", None)  # every hook was removed: the fast path again
            Module._call_hooks = False
            module_stack.append(self)
            try:
                return forward_call(*args, **kwargs)
            finally:
                module_stack.pop()

        result = None
        called_always_called_hooks = set()
        module_stack.append(self)
        try:
            try:
                if _global_forward_pre_hooks or self._forward_pre_hooks:
                    with_kwargs = self._forward_pre_hooks_with_kwargs
                    for hook_id, hook in (
                        *_global_forward_pre_hooks.items(),
                        *self._forward_pre_hooks.items(),
                    ):
                        if hook_id in with_kwargs:
                            args_kwargs_result = hook(self, args, kwargs)
                            if args_kwargs_result is not None:
                                if (
                                    isinstance(args_kwargs_result, tuple)
                                    and len(args_kwargs_result) == 2
                                ):
                                    args, kwargs = args_kwargs_result
                                else:
                                    raise RuntimeError(
                                        "forward pre-hook must return None or a tuple of "
                                        f"(new_args, new_kwargs), but got {args_kwargs_result}."
                                    )
                        else:
                            args_result = hook(self, args)
                            if args_result is not None:
                                if not isinstance(args_result, tuple):
                                    args_result = (args_result,)
                                args = args_result

                result = forward_call(*args, **kwargs)
                if _global_forward_hooks or self._forward_hooks:
                    for hook_id, hook in (
                        *_global_forward_hooks.items(),
                        *self._forward_hooks.items(),
                    ):
                        if (
                            hook_id in self._forward_hooks_always_called
                            or hook_id in _global_forward_hooks_always_called
                        ):
                            called_always_called_hooks.add(hook_id)
                        if (
                            hook_id in self._forward_hooks_with_kwargs
                            or hook_id in _global_forward_hooks_with_kwargs
                        ):
                            hook_result = hook(self, args, kwargs, result)
                        else:
                            hook_result = hook(self, args, result)
                        if hook_result is not None:
                            result = hook_result
                return result
            except Exception:
                for hook_id, hook in _global_forward_hooks.items():
                    if (
                        hook_id in _global_forward_hooks_always_called
                        and hook_id not in called_always_called_hooks
                    ):
                        try:
                            hook_result = hook(self, args, result)
                            if hook_result is not None:
                                result = hook_result
                        except Exception as e:
                            warnings.warn(
                                "global module forward hook with ``always_call=True`` raised an "
                                f"exception that was silenced as another error was raised in "
                                f"forward: {e}",
                                stacklevel=2,
                            )
                for hook_id, hook in self._forward_hooks.items():
                    if (
                        hook_id in self._forward_hooks_always_called
                        and hook_id not in called_always_called_hooks
                    ):
                        try:
                            if hook_id in self._forward_hooks_with_kwargs:
                                hook_result = hook(self, args, kwargs, result)
                            else:
                                hook_result = hook(self, args, result)
                            if hook_result is not None:
                                result = hook_result
                        except Exception as e:
                            warnings.warn(
                                "module forward hook with ``always_call=True`` raised an "
                                f"exception that was silenced as another error was raised in "
                                f"forward: {e}",
                                stacklevel=2,
                            )
                raise
        finally:
            module_stack.pop()

    # ---- hooks ----------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """`hook(module, args) -> None or new args` before each forward (a single value is
        wrapped in a tuple); with_kwargs: `hook(module, args, kwargs) -> None or (args, kwargs)`.
        prepend: run before this module's other pre-hooks (global ones still run first)."""
        hooks = _hook_dict(self, "_forward_pre_hooks")
        flags = _hook_dict(self, "_forward_pre_hooks_with_kwargs")
        handle = RemovableHandle(hooks, extra_dict=flags)
        hooks[handle.id] = hook
        if with_kwargs:
            flags[handle.id] = True
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        self.__dict__["_call_hooks"] = True
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """`hook(module, args, output) -> None or new output` after each forward; with_kwargs:
        `hook(module, args, kwargs, output)`; always_call: also when forward raised (then
        output is None). prepend: run before this module's other forward hooks."""
        hooks = _hook_dict(self, "_forward_hooks")
        with_kwargs_flags = _hook_dict(self, "_forward_hooks_with_kwargs")
        always_flags = _hook_dict(self, "_forward_hooks_always_called")
        handle = RemovableHandle(hooks, extra_dict=[with_kwargs_flags, always_flags])
        hooks[handle.id] = hook
        if with_kwargs:
            with_kwargs_flags[handle.id] = True
        if always_call:
            always_flags[handle.id] = True
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        self.__dict__["_call_hooks"] = True
        return handle

    def _register_state_dict_hook(self, hook):
        """`hook(module, state_dict, prefix, local_metadata) -> None or new state_dict` after
        the module's state_dict (a returned dict is used only at the root, as torch)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        hooks = _hook_dict(self, "_state_dict_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        """`hook(module, state_dict, prefix, local_metadata) -> None`: may edit state_dict in
        place after the module (and its submodules) wrote their entries."""
        hook._from_public_api = True
        hooks = _hook_dict(self, "_state_dict_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook):
        """`hook(module, prefix, keep_vars) -> None` before the module writes its entries."""
        hooks = _hook_dict(self, "_state_dict_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        hooks = _hook_dict(self, "_load_state_dict_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = _WrappedHook(hook, self if with_module else None)
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """`hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs) -> None` before the module loads its entries (state_dict
        is load_state_dict's own copy: renaming keys there is how old checkpoints are read)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """`hook(module, incompatible_keys) -> None` after the module and its submodules
        loaded; it may edit incompatible_keys' lists in place (which strict then checks)."""
        hooks = _hook_dict(self, "_load_state_dict_post_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    # ---- registration ---------------------------------------------------------------------

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                params = _init_registries(self)
            d.pop(name, None)
            self._remove_member(name, ("_buffers", "_modules"))
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                _init_registries(self)
                modules = d["_modules"]
            d.pop(name, None)
            self._remove_member(name, ("_parameters", "_buffers"))
            value = _registered(_global_module_registration_hooks, self, name, value)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(torch.nn.Module or None expected)"
                )
            value = _registered(_global_module_registration_hooks, self, name, value)
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            self.register_buffer(name, value, name not in self._non_persistent_buffers_set)
            return
        if name in _MEMBER_DICTS and params is not None and isinstance(value, dict):
            # `self._modules = OrderedDict(...)` (torch's ModuleList renumbers so): a registry
            # again, its entries copied into __dict__ and the old ones' taken out
            for old in d[name]:
                if isinstance(old, str) and old not in value:
                    d.pop(old, None)
            d[name] = _Members(self, value.items())
            return
        object.__setattr__(self, name, value)

    def _remove_member(self, name, kinds):
        d = self.__dict__
        for kind in kinds:
            members = d.get(kind)
            if members is not None and name in members:
                del members[name]
        if "_buffers" in kinds:
            non_persistent = d.get("_non_persistent_buffers_set")
            if non_persistent is not None:
                non_persistent.discard(name)

    def __delattr__(self, name):
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
        d = self.__dict__
        for kind in _MEMBER_DICTS:
            members = d.get(kind)
            if members is not None and not (
                isinstance(members, _Members) and members._owner() is self
            ):
                d[kind] = _Members(self, dict.items(members))

    def __dir__(self):
        keys = (
            dir(type(self))
            + list(self.__dict__)
            + list(self._parameters)
            + list(self._modules)
            + list(self._buffers)
        )
        return sorted({key for key in keys if not key[0].isdigit()})

    @property
    def _non_persistent(self):
        """The names of the non-persistent buffers (tinytensor's older name)."""
        return self._non_persistent_buffers_set

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Adds a Tensor that is part of the module's state but not trained (e.g. running
        statistics). It is set as the attribute `name`; `persistent=False` leaves it out of
        `state_dict()` (tables recomputed at construction, such as RoPE's cos/sin)."""
        buffers = self.__dict__.get("_buffers")
        if buffers is None:
            _init_registries(self)
            buffers = self.__dict__["_buffers"]
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'register_buffer: buffer name can\'t contain ".", got {name!r}')
        if name == "":
            raise KeyError('register_buffer: buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        tensor = _registered(_global_buffer_registration_hooks, self, name, tensor)
        buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Adds a Parameter (or None: a slot, such as Linear's bias=False) under `name`."""
        params = self.__dict__.get("_parameters")
        if params is None:
            params = _init_registries(self)
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in params:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            params[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(torch.nn.Parameter or None required)"
            )
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method."
            )
        param = _registered(_global_parameter_registration_hooks, self, name, param)
        params[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        """Registers `module` as the submodule `name` (same as `setattr(self, name, module)`,
        which is how PyTorch code that builds layers in a loop names them)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(
                f"add_module: {name!r} must be a Module or None, got {type(module).__name__}"
            )
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        modules = self.__dict__.get("_modules")
        if modules is None:
            _init_registries(self)
            modules = self.__dict__["_modules"]
        if hasattr(self, name) and name not in modules:
            raise KeyError(f"attribute '{name}' already exists")
        if not name or "." in name:
            raise KeyError(
                f"add_module: module name must be a non-empty string without '.', got {name!r}"
            )
        module = _registered(_global_module_registration_hooks, self, name, module)
        modules[name] = module

    def register_module(self, name: str, module: Module | None) -> None:
        """Alias of `add_module`, as PyTorch."""
        self.add_module(name, module)

    def _get_name(self):
        return type(self).__name__

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ('' is self), e.g. "transformer.h.0.attn"."""
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(
                    f"get_submodule({target!r}): {module._get_name()} has no submodule "
                    f"{item!r} (the attribute does not exist)"
                )
            parent, module = module, getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError(
                    f"get_submodule({target!r}): {parent._get_name()} has no submodule "
                    f"{item!r} (the attribute `{item}` is not an nn.Module)"
                )
        return module

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Replaces (or, unless strict, adds) the submodule at dotted path `target`."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]):
            current = getattr(parent, atoms[-1])
            if not isinstance(current, Module):
                raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target: str) -> Parameter:
        """The Parameter at dotted path `target`, e.g. "transformer.wte.weight"."""
        module_path, _, param_name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, param_name):
            raise AttributeError(
                f"get_parameter({target!r}): {module._get_name()} has no attribute `{param_name}`"
            )
        param = getattr(module, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError(
                f"get_parameter({target!r}): `{param_name}` is not an nn.Parameter"
            )
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path `target`."""
        module_path, _, buffer_name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, buffer_name):
            raise AttributeError(
                f"get_buffer({target!r}): {module._get_name()} has no attribute `{buffer_name}`"
            )
        buffer = getattr(module, buffer_name)
        if buffer_name not in module._buffers:
            raise AttributeError(f"get_buffer({target!r}): `{buffer_name}` is not a buffer")
        return buffer

    def get_extra_state(self):
        """Override (with set_extra_state) to save any picklable object in the state_dict,
        under `<prefix>_extra_state`."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called: "
            "override get_extra_state (and set_extra_state) to keep extra state"
        )

    def set_extra_state(self, state) -> None:
        """Override (with get_extra_state): receives what get_extra_state returned."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called: "
            "override set_extra_state (and get_extra_state) to keep extra state"
        )

    # ---- walking the tree -----------------------------------------------------------------

    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k), v

    def named_children(self):
        """(name, Module) for the direct submodules, in registration order (each once)."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate=True):
        """(dotted name, Module) for this module ('') and every submodule, pre-order; a module
        reachable under several names is listed once unless remove_duplicate=False."""
        if memo is None:
            memo = set()
        if self not in memo:
            if remove_duplicate:
                memo.add(self)
            yield prefix, self
            for name, module in self._modules.items():
                if module is None:
                    continue
                submodule_prefix = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

    def modules(self, remove_duplicate: bool = True):
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        """(dotted name, Parameter) pairs; a parameter shared by several modules is listed once,
        under the first name found (unless remove_duplicate=False)."""
        yield from self._named_members(
            lambda module: module._parameters.items(),
            prefix=prefix,
            recurse=recurse,
            remove_duplicate=remove_duplicate,
        )

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        yield from self._named_members(
            lambda module: module._buffers.items(),
            prefix=prefix,
            recurse=recurse,
            remove_duplicate=remove_duplicate,
        )

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self) -> int:
        """Number of scalar weights (shared parameters counted once)."""
        return sum(p.numel() for p in self.parameters())

    # ---- state ----------------------------------------------------------------------------

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        """Writes this module's own parameters, persistent buffers and extra state (not its
        submodules') into `destination`; override it for a class-specific layout."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        non_persistent = self._non_persistent_buffers_set
        for name, buf in self._buffers.items():
            if buf is not None and name not in non_persistent:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name, as Tensors sharing the module's
        arrays (detached: no gradient, no graph; `keep_vars=True` gives the Parameters
        themselves), and each module's extra state. A tied parameter appears under each of its
        names. Keys get `prefix` in front; `destination` is a dict to fill. Save with
        `tt.save(model.state_dict(), path)`. The state-dict hooks run as torch's."""
        if args:
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead.",
                FutureWarning,
                stacklevel=2,
            )
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(
                    destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars
                )
        for hook in self._state_dict_hooks.values():
            hook_result = hook(self, destination, prefix, local_metadata)
            if not getattr(hook, "_from_public_api", False):
                if hook_result is not None:
                    destination = hook_result
            elif hook_result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        """Loads this module's own entries (not its submodules'), as torch's: values may be
        Tensors or arrays, cast to the parameter's dtype and device. Override it for a
        class-specific layout. Inside load_state_dict the copies wait until every module was
        checked (see load_state_dict)."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(
                state_dict,
                prefix,
                local_metadata,
                strict,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )

        non_persistent = self._non_persistent_buffers_set
        local_state = {k: v for k, v in self._parameters.items() if v is not None}
        for k, v in self._buffers.items():
            if v is not None and k not in non_persistent:
                local_state[k] = v
        assign = local_metadata.get("assign_to_params_buffers", False)
        plan = _load_plans[-1] if _load_plans else None

        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if isinstance(value, Tensor):
                array = value._array
            else:
                try:
                    array = get_array_module(value).asarray(value)
                except Exception:
                    array = None
                if array is None or array.dtype == object:
                    error_msgs.append(
                        f'While copying the parameter named "{key}", expected torch.Tensor or '
                        f"Tensor-like object from checkpoint but received {type(value)}"
                    )
                    continue
            if param.ndim == 0 and array.ndim == 1 and array.shape[0] == 1:
                array = array[0]  # torch's: a (1,) checkpoint entry loads into a 0-d tensor
            if tuple(array.shape) != tuple(param.shape):
                message = (
                    f"{key}: checkpoint shape {tuple(array.shape)}, model shape "
                    f"{tuple(param.shape)}"
                )
                error_msgs.append(message)
                if plan is not None:
                    plan.mismatched.append(message)
                continue
            step = functools.partial(_load_one, self, name, param, value, array, assign)
            if plan is None:
                step()
            else:
                plan.steps.append(step)

        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_state_key in state_dict:
                step = functools.partial(self.set_extra_state, state_dict[extra_state_key])
                if plan is None:
                    step()
                else:
                    plan.steps.append(step)
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)

        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix) :].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copies `state_dict` (name -> Tensor or array) into the parameters and buffers in place
        (`assign=True`: makes the checkpoint's tensors the parameters, keeping requires_grad).

        Every problem is reported at once, in one RuntimeError naming each key: missing keys and
        unexpected keys (only when `strict`), and keys whose shape differs (always). Unlike torch,
        nothing is copied when an error is raised (unless a load_state_dict post-hook exists:
        those run after the copies and may still clear the key lists). Values are cast to the
        parameter's dtype and device. Each module's `_load_from_state_dict` and its
        load-state-dict hooks run as torch's.

        Returns:
            (missing_keys, unexpected_keys), as PyTorch.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list = []
        unexpected_keys: list = []
        error_msgs: list = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata
        with_post_hooks = []

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state_dict,
                prefix,
                local_metadata,
                True,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state_dict = {
                        k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)
                    }
                    load(child, child_state_dict, child_prefix)
            if module._load_state_dict_post_hooks:
                with_post_hooks.append(module)

        plan = _LoadPlan()
        _load_plans.append(plan)
        try:
            load(self, state_dict)
        finally:
            _load_plans.pop()

        def problems():
            mismatched = set(plan.mismatched)
            found = []
            if strict and missing_keys:
                found.append(f"missing keys ({len(missing_keys)}): {', '.join(missing_keys)}")
            if strict and unexpected_keys:
                found.append(
                    f"unexpected keys ({len(unexpected_keys)}): {', '.join(unexpected_keys)}"
                )
            if plan.mismatched:
                found.append(
                    f"shape mismatches ({len(plan.mismatched)}): " + "; ".join(plan.mismatched)
                )
            found.extend(m for m in error_msgs if m not in mismatched)
            return found

        def fail(found):
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(found)
            )

        found = problems()
        if found and (not with_post_hooks or len(error_msgs)):
            fail(found)
        for step in plan.steps:
            step()
        incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
        for module in with_post_hooks:
            for hook in module._load_state_dict_post_hooks.values():
                out = hook(module, incompatible_keys)
                if out is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace."
                    )
        found = problems()
        if found:
            fail(found)
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---- modes, devices, gradients ------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Sets `training` here and calls each child's `train(mode)` (so an override runs)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
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

    def _apply(self, fn, recurse=True) -> Module:
        """`fn(tensor) -> tensor` for every parameter (and its gradient) and buffer, children
        first; the results' arrays replace the old ones IN PLACE, so the Parameter and buffer
        objects (and an optimizer holding them) stay the same."""
        from tinytensor import no_grad

        if recurse:
            for module in self.children():
                module._apply(fn)
        with no_grad():
            for param in self._parameters.values():
                if param is None:
                    continue
                param._array = fn(param)._array
                if param.grad is not None:
                    param.grad._array = fn(param.grad)._array
            for buf in self._buffers.values():
                if buf is not None:
                    buf._array = fn(buf)._array
        return self

    def to(self, *args, dtype=None, device=None, non_blocking=False, **kwargs) -> Module:
        """`model.to("cuda")`, `model.to(tt.float64)`, `model.to(tensor)`: moves/casts parameters
        and buffers IN PLACE (the same Parameter objects get new arrays), so an optimizer created
        before keeps valid references. Only floating-point tensors change dtype (as PyTorch)."""
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (str, Device)):
                device = a
            else:
                dtype = a
        dtype = dtypes.to_dtype(dtype)
        if dtype is not None and dtype.kind != "f":
            raise TypeError(f"Module.to: only floating dtypes are allowed, got {dtype}")
        device = Device(device) if device is not None else None
        seen = set()
        for module in self.modules():
            tensors = [p for p in module._parameters.values() if p is not None] + [
                b for b in module._buffers.values() if b is not None
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

    def cuda(self, device=None) -> Module:
        return self.to("cuda" if device is None or isinstance(device, int) else Device(device))

    def type(self, dst_type) -> Module:
        """Casts every parameter and buffer (integer ones too, as torch) to `dst_type`."""
        return self._apply(lambda t: t.type(dst_type))

    def float(self) -> Module:
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> Module:
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> Module:
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> Module:
        """As torch's, but NumPy has no bfloat16 arithmetic: with a floating-point parameter or
        buffer this is the TypeError `tt.bfloat16` gives everywhere."""
        return self._apply(lambda t: t.to(dtypes.bfloat16) if t.is_floating_point() else t)

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Gives every parameter and buffer uninitialized storage on `device`."""
        from tinytensor.creation import empty_like

        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def share_memory(self) -> Module:
        """torch's moves the storage to shared memory for worker processes. A tensor with
        `share_memory_` has it called; NumPy arrays have no such move (a fork shares their pages
        copy-on-write; a spawned process gets a copy), so elsewhere this returns self as is."""
        return self._apply(lambda t: t.share_memory_() if hasattr(t, "share_memory_") else t)

    def apply(self, fn) -> Module:
        """Calls `fn(module)` on every submodule (children first) and then on self, e.g. for a
        custom weight initialization."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def compile(self, *args, **kwargs) -> None:
        """As `tt.compile`: the module runs as it is (there is no compiler)."""
        return None

    # ---- printing -------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The layer's settings, shown inside the parentheses of its repr."""
        return ""

    def __repr__(self):
        extra_lines = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"


def _load_one(module, name, param, value, array, assign):
    """One parameter or buffer of load_state_dict: copied into place, or (assign) replaced."""
    if assign:
        tensor = value if isinstance(value, Tensor) else Tensor(array)
        if isinstance(param, Parameter):
            tensor = Parameter(tensor, requires_grad=param.requires_grad)
        setattr(module, name, tensor)
        return
    array = move_array(get_array_module(array).asarray(array), param.device)
    param._array[...] = array.astype(param.dtype, copy=False)
