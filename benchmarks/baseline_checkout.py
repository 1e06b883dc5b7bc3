"""`--baseline PATH` of the benchmarks: the PYTHONPATH under which another checkout's tinytensor
imports whole, `tinytensor.nn` and `tinytensor.models` included.

In a checkout those two live beside the package (nn/, models/: pyproject's package-dir), so a
plain PYTHONPATH=PATH gives that checkout's `tinytensor` but the installed checkout's `nn` and
`models` (the editable install maps them by name). This builds the installed layout in a
temporary directory instead: PATH/tinytensor's entries, plus nn and models, as symlinks.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

SUBPACKAGES = {"nn": "nn", "models": "models"}  # tinytensor.<name> -> the checkout's folder


def pythonpath_for(checkout: str) -> str:
    """A directory holding `tinytensor` as `checkout` installs it (removed at exit)."""
    checkout = os.path.abspath(checkout)
    source = os.path.join(checkout, "tinytensor")
    if not os.path.isdir(source):
        raise SystemExit(f"--baseline: {checkout} has no tinytensor/ folder (not a checkout?)")
    root = tempfile.mkdtemp(prefix="tinytensor-baseline-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    package = os.path.join(root, "tinytensor")
    os.mkdir(package)
    for entry in os.listdir(source):
        os.symlink(os.path.join(source, entry), os.path.join(package, entry))
    for name, folder in SUBPACKAGES.items():
        if os.path.isdir(os.path.join(checkout, folder)) and name not in os.listdir(source):
            os.symlink(os.path.join(checkout, folder), os.path.join(package, name))
    return root
