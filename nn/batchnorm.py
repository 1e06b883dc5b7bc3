"""`BatchNorm1d`: normalization over the batch, with running statistics for evaluation."""

from __future__ import annotations

from tinytensor.creation import ones, tensor, zeros
from tinytensor.dtypes import int64
from tinytensor.function import no_grad
from tinytensor.ops._checks import check_finite, check_int

from .module import Module
from .parameter import Parameter


class BatchNorm1d(Module):
    """y = (x - E[x]) / √(Var[x] + eps) · weight + bias per channel, as `torch.nn.BatchNorm1d`.

    In training the batch statistics are used (NOTE: the biased variance normalizes, as
    PyTorch) and the running estimates are updated with PyTorch's momentum definition,
        running = (1 - momentum)·running + momentum·batch_statistic,
    using the UNBIASED batch variance for `running_var` (momentum=None: a cumulative average
    over `num_batches_tracked` batches). In eval the running estimates are used.

    Args:
        num_features: C, the channel count.
        eps: added to the variance.
        momentum: weight of the new batch in the running statistics (None: cumulative average).
        affine: learn `weight` (ones) and `bias` (zeros).
        track_running_stats: keep `running_mean`, `running_var`, `num_batches_tracked` buffers;
            without them batch statistics are used in eval too.

    Shape:
        (N, C) or (N, C, L) -> same shape; statistics over N (and L).
    """

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_int(num_features, "BatchNorm1d", "num_features", minimum=0)
        check_finite(eps, "BatchNorm1d", "eps", low=0.0)
        if momentum is not None:  # None: a cumulative average, as PyTorch
            check_finite(momentum, "BatchNorm1d", "momentum", low=0.0, high=1.0)
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = self.bias = None
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype, device=device))
            self.bias = Parameter(zeros(num_features, dtype=dtype, device=device))
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer(
                "num_batches_tracked", tensor(0, dtype=int64, device=device or "cpu")
            )

    def reset_running_stats(self) -> None:
        """running_mean 0, running_var 1, num_batches_tracked 0 (as torch's)."""
        if self.track_running_stats:
            self.running_mean._array[...] = 0
            self.running_var._array[...] = 1
            self.num_batches_tracked._array[...] = 0

    def reset_parameters(self) -> None:
        """The running statistics reset, weight 1 and bias 0 (as torch's)."""
        self.reset_running_stats()
        if self.weight is not None:
            self.weight._array[...] = 1
            self.bias._array[...] = 0

    def _check_input(self, x):
        if x.ndim not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm1d: expected input (N, {self.num_features}) or (N, "
                f"{self.num_features}, L), got {tuple(x.shape)}"
            )

    def forward(self, x):
        self._check_input(x)
        axes = (0,) if x.ndim == 2 else (0, 2)
        shape = (1, -1) if x.ndim == 2 else (1, -1, 1)  # per-channel values broadcast over N, L
        use_batch_stats = self.training or not self.track_running_stats
        if use_batch_stats:
            count = x.numel() // self.num_features
            if self.training and count <= 1:
                raise ValueError(
                    f"BatchNorm1d: expected more than 1 value per channel when training, got "
                    f"input of shape {tuple(x.shape)}"
                )
            mean = x.mean(dim=axes, keepdim=True)
            centered = x - mean
            var = (centered * centered).mean(dim=axes, keepdim=True)  # biased, for normalizing
            if self.training and self.track_running_stats:
                self._update_running_stats(mean, var, count)
        else:
            centered = x - self.running_mean.reshape(shape)
            var = self.running_var.reshape(shape)
        y = centered * (var + self.eps).rsqrt()
        if self.affine:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y

    @no_grad()
    def _update_running_stats(self, mean, var, count):
        self.num_batches_tracked._array[...] += 1
        if self.momentum is None:  # cumulative moving average
            factor = 1.0 / float(self.num_batches_tracked.item())
        else:
            factor = float(self.momentum)
        unbiased = var._array.reshape(-1) * (count / (count - 1))  # (C,)
        rm, rv = self.running_mean._array, self.running_var._array
        rm[...] = (1 - factor) * rm + factor * mean._array.reshape(-1)
        rv[...] = (1 - factor) * rv + factor * unbiased

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )
