"""`RemovableHandle`: what every `register_*_hook` returns, as `torch.utils.hooks.RemovableHandle`.

    handle = model.fc.register_forward_hook(lambda m, args, out: print(out.shape))
    model(x)
    handle.remove()                     # or: with model.fc.register_forward_hook(...): model(x)

The handle holds only weak references to the dicts of hooks it was registered in (a handle kept
by the user does not keep a deleted module alive); `remove()` deletes the hook's id from them and
is safe to call twice. Ids are unique across all handles, so one id can key several dicts (a
hook's flags such as with_kwargs live in dicts of their own under the same id).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """A handle that removes one hook: `handle.remove()`, or leaving `with handle:`.

    Args:
        hooks_dict: the dict of hooks, keyed by the handle's `id`.
        extra_dict: a dict or a list of dicts from which the same id is removed too.
    """

    id: int
    next_id: int = 0

    def __init__(self, hooks_dict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.extra_dict_ref: tuple = ()
        if isinstance(extra_dict, dict):
            self.extra_dict_ref = (weakref.ref(extra_dict),)
        elif isinstance(extra_dict, list):
            self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self) -> None:
        hooks_dict = self.hooks_dict_ref()
        if hooks_dict is not None and self.id in hooks_dict:
            del hooks_dict[self.id]
        for ref in self.extra_dict_ref:
            extra_dict = ref()
            if extra_dict is not None and self.id in extra_dict:
                del extra_dict[self.id]

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state) -> None:
        if state[0] is None:
            self.hooks_dict_ref = weakref.ref(OrderedDict())  # a dead reference
        else:
            self.hooks_dict_ref = weakref.ref(state[0])
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        extra = state[2] if len(state) > 2 and state[2] is not None else ()
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra if d is not None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, exc_type, exc_value, tb) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.id}>"
