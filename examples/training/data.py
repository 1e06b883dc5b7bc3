"""Text for the examples: a corpus, a character tokenizer, a train/validation split, and batches.

The default corpus is the Python reference manual's topic texts that ship with the standard
library (`pydoc_data.topics`: ~465k characters, 103 distinct ones), so the examples need no
download. Batches are random windows drawn from a seeded NumPy generator whose state goes into
the checkpoint, so a resumed run sees exactly the batches an uninterrupted one would have.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np


def load_text(path: str | None = None) -> str:
    """The training text: the file at `path` (UTF-8), or the pydoc topics corpus when None.

    Raises:
        FileNotFoundError: `path` does not exist (the message names it).
        ValueError: not a readable regular file, not valid UTF-8 (the message gives the byte
            offset of the first bad byte), or too short to train on.
    """
    return load_text_and_hash(path)[0]


def load_text_and_hash(path: str | None = None) -> tuple[str, str]:
    """`load_text(path)` and the SHA-256 (hex) of what it was read from: the file's bytes, or
    the default corpus's UTF-8. A checkpoint records it, so that `--resume` notices a changed
    file."""
    if path is None:
        from pydoc_data import topics

        text = "".join(topics.topics.values())
        return text, hashlib.sha256(text.encode("utf-8")).hexdigest()
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file {path!r} does not exist (pass a UTF-8 text file)")
    if not os.path.isfile(path):  # a directory, a FIFO (reading it would wait forever), ...
        raise ValueError(f"data file {path!r} is not a regular file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"data file {path!r} cannot be read: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        # NOTE: decoding with errors="replace" would train the model on U+FFFD characters
        raise ValueError(
            f"data file {path!r} is not valid UTF-8: byte 0x{raw[e.start]:02x} at offset "
            f"{e.start} ({e.reason}); convert it first, e.g. iconv -f latin1 -t utf-8"
        ) from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as Python's text mode reads it
    if len(text) < 100:
        raise ValueError(f"data file {path!r} holds {len(text)} characters; need at least 100")
    return text, hashlib.sha256(raw).hexdigest()


class CharTokenizer:
    """Maps each distinct character of a text to an id (sorted, so the same text gives the same
    vocabulary), plus optional special tokens appended after the characters.

    Example:
        >>> tok = CharTokenizer.from_text("hello")
        >>> tok.decode(tok.encode("hole"))
        'hole'
    """

    def __init__(self, chars: str, specials: tuple[str, ...] = ()):
        self.chars = chars
        self.specials = tuple(specials)
        self.itos = list(chars) + list(self.specials)
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.special_ids = {name: len(chars) + i for i, name in enumerate(self.specials)}

    @classmethod
    def from_text(cls, text: str, specials: tuple[str, ...] = ()) -> CharTokenizer:
        return cls("".join(sorted(set(text))), specials)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> np.ndarray:
        """int64 ids of the characters of `text`; a character outside the vocabulary is an error."""
        try:
            return np.fromiter((self.stoi[ch] for ch in text), dtype=np.int64, count=len(text))
        except KeyError as e:
            raise ValueError(
                f"CharTokenizer.encode: character {e.args[0]!r} is not in the vocabulary"
            ) from None

    def decode(self, ids) -> str:
        """The text of `ids`; special tokens are dropped."""
        n = len(self.chars)
        return "".join(self.chars[i] for i in (int(i) for i in ids) if 0 <= i < n)

    def state_dict(self) -> dict:
        return {"chars": self.chars, "specials": list(self.specials)}

    @classmethod
    def from_state_dict(cls, state: dict) -> CharTokenizer:
        return cls(state["chars"], tuple(state["specials"]))


def split_train_val(ids: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The first (1 - val_fraction) of the ids for training, the rest for validation.

    NOTE: a contiguous tail, not a random sample of positions: random windows would overlap the
    training text and make the validation loss optimistic.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_val = int(round(len(ids) * val_fraction))
    if n_val < 2 or len(ids) - n_val < 2:
        raise ValueError(
            f"a text of {len(ids)} tokens is too short to split {val_fraction:.0%} off"
        )
    return ids[: len(ids) - n_val], ids[len(ids) - n_val :]


class RandomWindows:
    """Batches of random windows of a token stream, for next-token prediction.

    `next_batch()` gives (x, y) of shape (batch_size, block_size) with y = x shifted by one. The
    window starts come from a private PCG64 generator: `state_dict()` / `load_state_dict()`
    save and restore it, so a resumed run draws the same batches as an uninterrupted one.
    """

    def __init__(self, ids: np.ndarray, block_size: int, batch_size: int, seed: int = 0):
        if len(ids) < block_size + 2:
            raise ValueError(
                f"the text has {len(ids)} tokens, too few for windows of block_size={block_size}"
            )
        self.ids, self.block_size, self.batch_size = ids, block_size, batch_size
        self.rng = np.random.default_rng(seed)

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        starts = self.rng.integers(0, len(self.ids) - self.block_size - 1, size=self.batch_size)
        rows = starts[:, None] + np.arange(self.block_size + 1)  # (B, T+1)
        windows = self.ids[rows]
        return windows[:, :-1], windows[:, 1:]

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


def fixed_windows(ids: np.ndarray, block_size: int, max_windows: int) -> tuple[np.ndarray, ...]:
    """Up to `max_windows` evenly spaced (x, y) windows covering `ids`: the same every call, so
    validation losses at different steps are comparable and draw no random numbers."""
    last_start = len(ids) - block_size - 1
    if last_start < 0:
        raise ValueError(f"{len(ids)} tokens are too few for one window of {block_size}")
    n = min(max_windows, last_start // block_size + 1)
    starts = np.linspace(0, last_start, n).astype(np.int64)
    rows = starts[:, None] + np.arange(block_size + 1)
    windows = ids[rows]
    return windows[:, :-1], windows[:, 1:]
