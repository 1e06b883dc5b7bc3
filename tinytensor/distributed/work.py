"""`Work`: the handle of a collective started with `async_op=True` (or by DDP during backward)."""

from __future__ import annotations


class Work:
    """Waits for one non-blocking collective, then runs what must follow it (e.g. / world size).

    Args:
        wait_fn: blocks until the communication is done (e.g. an MPI request's Wait).
        then: called once after the wait (None: nothing to do).
        test_fn: returns True if the communication is done, without blocking (None: unknown,
            `is_completed()` then answers only after `wait()`).
    """

    __slots__ = ("_wait_fn", "_then", "_test_fn", "_done")

    def __init__(self, wait_fn=None, then=None, test_fn=None):
        self._wait_fn, self._then, self._test_fn = wait_fn, then, test_fn
        self._done = False

    def wait(self, timeout=None) -> bool:
        """Blocks until the collective has finished and its result is in place; returns True."""
        if not self._done:
            if self._wait_fn is not None:
                self._wait_fn()
            if self._then is not None:
                self._then()
            self._done = True
        return True

    def is_completed(self) -> bool:
        """True once `wait()` has run; False while the communication may still be in flight."""
        if self._done:
            return True
        if self._test_fn is not None and self._test_fn():
            self.wait()
            return True
        return False


def completed() -> Work:
    """A Work that is already done (a collective that ran synchronously)."""
    work = Work()
    work._done = True
    return work
