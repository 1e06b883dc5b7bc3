"""torch.backends.mkldnn's flags (no MKL-DNN here; the matrix products use MKL's BLAS)."""

enabled = True


def is_available() -> bool:
    return False
