"""`Optimizer`: the base class that holds parameter groups and per-parameter state.

    opt = tt.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for x, y in batches:
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()

As in PyTorch, parameters are organized in `param_groups` (a list of dicts, each with its own
hyperparameters such as `lr` and `weight_decay`), `state[p]` holds each parameter's buffers
(momentum, Adam moments), and `state_dict()` names parameters by their position across groups so
that it can be saved (`tt.save`) and loaded into a fresh optimizer over new parameter objects.
Subclasses implement `_update_group(group)`; updates act in place on `p._array`, so a parameter
keeps its identity (modules and other optimizers still see the same Tensor).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import numbers

from ..backend import get_array_module, move_array
from ..function import enable_grad, no_grad
from ..tensor import Tensor


def _as_param_list(params, where):
    """Normalizes what users pass as parameters: an iterable of Tensors, one Tensor, a module."""
    if isinstance(params, Tensor):
        return [params]
    if isinstance(params, (set, frozenset)):
        # NOTE: a set has no stable order, so state_dict indices would change between runs.
        raise TypeError(f"{where}: parameters must be an ordered iterable (list), not a set")
    if hasattr(params, "parameters") and callable(params.parameters):
        params = params.parameters()  # duck-typed module
    try:
        params = list(params)
    except TypeError:
        raise TypeError(
            f"{where}: expected an iterable of Tensors or of parameter-group dicts, "
            f"got {type(params).__name__}"
        ) from None
    return params


@functools.cache
def _numeric_hyperparameters(cls) -> frozenset:
    """The names of `cls`'s numeric hyperparameters: lr, and every constructor argument whose
    default is a number or a tuple of numbers (momentum, eps, betas, ...; flags are bools)."""
    names = {"lr"}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        default = param.default
        values = default if isinstance(default, tuple) else (default,)
        if values and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
            names.add(name)
    return frozenset(names)


def _check_hyperparameters(where, group, names) -> None:
    """Every numeric hyperparameter of the group is a finite real number.

    NOTE: PyTorch checks `lr < 0` only, so a NaN lr passes and every weight becomes NaN at the
    first step; here NaN and inf are refused, and so are strings and bools where a number goes.
    """
    for key in names:
        if key not in group:
            continue
        value = group[key]
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, Tensor) and v.numel() == 1:  # a tensor lr, as PyTorch allows
                v = v.item()
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise TypeError(
                    f"{where}: {key} must be a number, got {type(v).__name__} {value!r}"
                )
            if not math.isfinite(v):
                raise ValueError(f"{where}: {key} must be finite, got {value}")


class Optimizer:
    """Base class of the optimizers: parameter groups, state, zero_grad, state_dict.

    Args:
        params: an iterable of Tensors (e.g. `model.parameters()`), or a list of dicts, each with
            a "params" entry and its own hyperparameters that override `defaults`:
            `[{"params": weights, "weight_decay": 0.1}, {"params": biases, "weight_decay": 0.0}]`.
        defaults: the default hyperparameters of every group.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}  # Tensor (by identity) -> dict of buffers
        self.param_groups: list[dict] = []
        name = type(self).__name__
        params = _as_param_list(params, name)
        if not params:
            raise ValueError(f"{name}: got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"

    # ---- groups -------------------------------------------------------------------------------

    def add_param_group(self, param_group: dict) -> None:
        """Adds a group of parameters with its own hyperparameters (e.g. a layer to unfreeze)."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(
                f"{name}.add_param_group: expected a dict with a 'params' entry, "
                f"got {type(param_group).__name__}"
            )
        if "params" not in param_group:
            raise ValueError(f"{name}.add_param_group: the group dict has no 'params' entry")
        group = dict(param_group)
        group["params"] = _as_param_list(group["params"], f"{name}.add_param_group")
        for i, p in enumerate(group["params"]):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{name}: parameter {i} of a group is a {type(p).__name__}, not a Tensor"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"{name}: parameter {i} (shape {p.shape}) is not a leaf tensor: it was "
                    "computed by an op; optimize the tensor it came from, or .detach() it"
                )
        ids = [id(p) for p in group["params"]]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: a parameter group lists the same tensor twice")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen.intersection(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        for key, default in self.defaults.items():
            if default is _REQUIRED and key not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of '{key}'")
            group.setdefault(key, default)
        _check_hyperparameters(name, group, _numeric_hyperparameters(type(self)))
        self._validate_group(group)
        self.param_groups.append(group)

    def _validate_group(self, group: dict) -> None:
        """Subclasses check their hyperparameters here (negative lr, betas outside [0, 1) ...)."""

    # ---- the training-loop API ----------------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forgets the gradients: `p.grad = None` (default), or fills them with zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._array[...] = 0

    def step(self, closure=None):
        """Updates every parameter that has a gradient, in place.

        Args:
            closure: optional callable that re-evaluates the model and returns the loss
                (it runs with gradients enabled); its loss is returned.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
                # The updates write into p._array: mark each updated parameter modified, so a
                # backward through a graph built before this step raises instead of silently
                # using the new weights (PyTorch's version counter does the same).
                for p in group["params"]:
                    if p.grad is not None:
                        p._bump_version(f"{type(self).__name__}.step")
        return loss

    def _update_group(self, group: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _update_group")

    def _gradients(self, group: dict, buffers=()):
        """Yields (p, g, state) for each parameter of the group that has a gradient: the loop
        glue of the element-wise optimizers (Adagrad, Adadelta, RMSprop).

        g = grad (negated if group["maximize"]) + weight_decay * p (the L2 penalty, coupled);
        state = self.state[p], holding the named `buffers` (zeros like p where new) and "step",
        already advanced by one.
        """
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = -p.grad._array if maximize else p.grad._array
            state = self.state.setdefault(p, {})
            for key in buffers:
                if key not in state:
                    zeros = get_array_module(p._array).zeros_like(p._array)
                    state[key] = Tensor._wrap(zeros, False, None)
            state["step"] = int(state.get("step", 0)) + 1  # int(): PyTorch saves a tensor
            if weight_decay != 0:
                g = g + weight_decay * p._array
            yield p, g, state

    # ---- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The optimizer's state as plain data, with parameters named by their index.

        Returns `{"state": {index: {buffer name: Tensor or number}}, "param_groups": [{...,
        "params": [indices]}]}` as PyTorch does; indices count parameters across groups in order.
        The buffers are the live ones (not copies), as in PyTorch; `tt.save` writes them out.
        """
        index_of, groups, start = {}, [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            for i, p in enumerate(group["params"]):
                index_of[id(p)] = start + i
            start += len(group["params"])
            groups.append(packed)
        state = {index_of[id(p)]: s for p, s in self.state.items() if id(p) in index_of}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores hyperparameters and buffers saved by `state_dict()` (copies them).

        The groups must list as many parameters as when the state was saved; floating-point
        buffers are cast to each parameter's dtype and moved to its device.
        """
        name = type(self).__name__
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= state_dict.keys():
            raise ValueError(
                f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups' "
                "(from optimizer.state_dict())"
            )
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: the saved state has {len(saved_groups)} parameter "
                f"group(s), this optimizer has {len(self.param_groups)}"
            )
        params_by_index = {}
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: group {i} was saved with {len(saved['params'])} "
                    f"parameters, this optimizer's group {i} has {len(group['params'])}"
                )
            params_by_index.update(zip(saved["params"], group["params"]))
        self.state = {}
        for index, buffers in state_dict["state"].items():
            p = params_by_index.get(int(index))
            if p is None:
                raise ValueError(
                    f"{name}.load_state_dict: the state names parameter {index}, which no "
                    "saved group lists"
                )
            self.state[p] = {k: _buffer_for(p, k, v) for k, v in buffers.items()}
        for saved, group in zip(saved_groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    group[k] = copy.deepcopy(v)


def _buffer_for(p: Tensor, key: str, value):
    """A copy of a saved buffer on p's device; floating buffers get p's dtype (as PyTorch)."""
    if not isinstance(value, Tensor):
        return copy.deepcopy(value)
    data = move_array(value._array, p.device).copy()
    if data.dtype.kind == "f" and key != "step":
        data = data.astype(p.dtype, copy=False)
    return Tensor._wrap(data, False, None)


class _RequiredParameter:
    """Marks a hyperparameter that has no default (each group must give it)."""

    def __repr__(self):
        return "<required parameter>"


_REQUIRED = _RequiredParameter()
