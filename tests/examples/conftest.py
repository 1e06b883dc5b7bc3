"""Makes `examples/` importable (its scripts import the `training` package next to them)."""

import os
import sys

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, os.path.abspath(EXAMPLES))
