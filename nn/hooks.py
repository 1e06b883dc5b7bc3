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

import itertools
import weakref

__all__ = ["RemovableHandle"]

_ids = itertools.count()  # one sequence for every handle: an id keys a hook's flag dicts too


class RemovableHandle:
    """A handle that removes one hook: `handle.remove()`, or leaving `with handle:`.

    Args:
        hooks_dict: the dict of hooks, keyed by the handle's `id`.
        extra_dict: a dict or a list of dicts from which the same id is removed too.
    """

    def __init__(self, hooks_dict, *, extra_dict=None) -> None:
        self.id = next(_ids)
        extras = [] if extra_dict is None else extra_dict
        extras = [extras] if isinstance(extras, dict) else list(extras)
        self._dicts = tuple(weakref.ref(d) for d in (hooks_dict, *extras))

    def remove(self) -> None:
        """Unregisters the hook (again: nothing happens; a module gone: nothing to do)."""
        for ref in self._dicts:
            hooks = ref()
            if hooks is not None:
                hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.id}>"
