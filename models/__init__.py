"""tinytensor.models: GPT, BERT, T5 and BART, loadable from HuggingFace checkpoints.

from tinytensor.models import GPT, GPTConfig, from_pretrained
model = from_pretrained("path/to/hf_checkpoint")    # class chosen from config.json
"""

# ruff: noqa: F401 - this file re-exports the public API
from . import collators, generation
from .bart import BART, BARTConfig
from .bert import BERT, BERTConfig
from .gpt import GPT, GPTConfig
from .hf import CheckpointError, from_pretrained
from .output import ModelOutput
from .t5 import T5, T5Config
