"""`normal_init_`: the Gaussian weight initialization that BERT and BART share (Devlin et al.
2019; Lewis et al. 2020, following BERT)."""

from __future__ import annotations

import tinytensor as tt


def normal_init_(model, std: float = 0.02):
    """In place: biases 0, norm weights 1 (every parameter named "*norm*"), the rest N(0, std)."""
    with tt.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, std)
