"""torch.backends.cudnn's flags (there is no cuDNN here: they are read and set, nothing else)."""

allow_tf32 = True
benchmark = False
deterministic = False
enabled = True


def is_available() -> bool:
    return False


def version():
    return None
