"""`tt.optim`: optimizers (SGD, Adam, AdamW, Adagrad, Adadelta, RMSprop), learning-rate schedules
and gradient clipping.

    opt = tt.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    sched = tt.optim.lr_scheduler.get_cosine_schedule_with_warmup(opt, 100, 5000)
    loss.backward()
    tt.optim.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); sched.step(); opt.zero_grad()

Names, arguments and update rules are PyTorch's (`torch.optim`), so training scripts port over.
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .clip import clip_grad_norm_, clip_grad_value_
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "Adagrad",
    "Adadelta",
    "RMSprop",
    "lr_scheduler",
    "clip_grad_norm_",
    "clip_grad_value_",
]
