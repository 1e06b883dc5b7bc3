"""`tt.backends`: the switches PyTorch programs set at start-up (`allow_tf32`, `cudnn.benchmark`).

They are real flags that can be read and set, in modules of torch's names, so that both
`tt.backends.cudnn.benchmark = True` and `import tinytensor.backends.cudnn as cudnn` work. TF32
is an NVIDIA tensor-core format that our float32 kernels never use, and there is no cuDNN, MKL-DNN
or Metal here: they change no numbers (as on a CPU in PyTorch).
"""

from . import cuda, cudnn, mkldnn, mps

__all__ = ["cuda", "cudnn", "mkldnn", "mps"]
