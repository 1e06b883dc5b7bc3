"""`tt.nn.utils`: gradient clipping where PyTorch users look for it (`nn.utils.clip_grad_norm_`).

The implementations live in tinytensor/optim/clip.py, next to the optimizers that use them.
"""

from tinytensor.optim.clip import clip_grad_norm, clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_"]
