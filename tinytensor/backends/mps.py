"""torch.backends.mps: Apple's Metal backend, never available here."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
