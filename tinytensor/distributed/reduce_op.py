"""`ReduceOp`: how a collective combines the ranks' tensors, as `torch.distributed.ReduceOp`."""

from __future__ import annotations

import enum


class ReduceOp(enum.Enum):
    """SUM, AVG (the sum divided by the world size), PRODUCT, MAX, MIN; elementwise."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"


def as_reduce_op(op, where: str) -> ReduceOp:
    """`op` as a ReduceOp (also accepts its name, e.g. "sum"); a clear error otherwise."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        for member in ReduceOp:
            if op.lower() == member.value or op.upper() == member.name:
                return member
    names = ", ".join(f"ReduceOp.{m.name}" for m in ReduceOp)
    raise ValueError(f"{where}: op must be one of {names}, got {op!r}")
