"""Sequence-to-sequence tasks made on the fly, with an exact answer to score against.

    reverse  "k3f9a"      -> "a9f3k"
    sort     "qdxa"       -> "adqx"      (distinct letters, alphabetical)
    add      "457+86"     -> "543"

Token ids: 0 = <pad>, 1 = <s> (decoder start), 2 = </s> (end), then the task's characters. Each
example is a source string and a target string. `held_out_examples` draws a fixed validation set
from its own seed; `Seq2SeqBatches` turns random examples into padded id arrays from a seeded
generator whose state the checkpoint keeps, and never yields a held-out source, so the exact-match
accuracy measures generalisation rather than memory.
"""

from __future__ import annotations

import string

import numpy as np

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<s>", "</s>")

TASK_CHARS = {
    "reverse": string.digits + string.ascii_lowercase,
    "sort": string.ascii_lowercase,
    "add": string.digits + "+",
}


def make_example(
    task: str, rng: np.random.Generator, min_len: int, max_len: int
) -> tuple[str, str]:
    """One (source, target) pair of `task` with a source of min_len..max_len characters."""
    if task == "reverse":
        n = int(rng.integers(min_len, max_len + 1))
        chars = TASK_CHARS["reverse"]
        src = "".join(chars[i] for i in rng.integers(0, len(chars), size=n))
        return src, src[::-1]
    if task == "sort":
        n = int(rng.integers(min_len, min(max_len, 26) + 1))
        letters = rng.choice(26, size=n, replace=False)
        src = "".join(string.ascii_lowercase[i] for i in letters)
        return src, "".join(sorted(src))
    if task == "add":
        # operands of 1..(max_len-1)//2 digits so that "a+b" fits in max_len characters
        most = max(1, (max_len - 1) // 2)
        a, b = (int(rng.integers(0, 10 ** int(rng.integers(1, most + 1)))) for _ in range(2))
        return f"{a}+{b}", str(a + b)
    raise ValueError(f"unknown task {task!r}: choose from {sorted(TASK_CHARS)}")


class TaskVocab:
    """Ids for a task's characters after the three special tokens."""

    def __init__(self, task: str):
        if task not in TASK_CHARS:
            raise ValueError(f"unknown task {task!r}: choose from {sorted(TASK_CHARS)}")
        self.chars = TASK_CHARS[task]
        self.stoi = {ch: i + len(SPECIALS) for i, ch in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + len(self.chars)

    def encode(self, text: str, eos: bool = True) -> list[int]:
        return [self.stoi[ch] for ch in text] + ([EOS] if eos else [])

    def decode(self, ids) -> str:
        """Text up to the first </s>; other special tokens are dropped."""
        out = []
        for i in (int(i) for i in ids):
            if i == EOS:
                break
            if i >= len(SPECIALS):
                out.append(self.chars[i - len(SPECIALS)])
        return "".join(out)


def pad_rows(rows: list[list[int]], value: int = PAD) -> np.ndarray:
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), value, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def encode_batch(vocab: TaskVocab, pairs) -> dict:
    """Padded arrays for teacher forcing: input_ids, attention_mask, decoder_input_ids (<s> then
    the target) and labels (the target then </s>, -100 on padding)."""
    src = pad_rows([vocab.encode(s) for s, _ in pairs])
    tgt = [vocab.encode(t) for _, t in pairs]
    labels = pad_rows(tgt, value=-100)
    decoder_inputs = pad_rows([[BOS] + t[:-1] for t in tgt])
    return {
        "input_ids": src,
        "attention_mask": (src != PAD).astype(np.int64),
        "decoder_input_ids": decoder_inputs,
        "labels": labels,
    }


class Seq2SeqBatches:
    """Random task examples, batch after batch, from a generator whose state can be saved."""

    def __init__(self, task, vocab, batch_size, min_len, max_len, seed=0, exclude=()):
        self.task, self.vocab, self.batch_size = task, vocab, batch_size
        self.min_len, self.max_len = min_len, max_len
        self.exclude = {src for src, _ in exclude}  # held-out sources never trained on
        self.rng = np.random.default_rng(seed)

    def _example(self) -> tuple[str, str]:
        while True:
            pair = make_example(self.task, self.rng, self.min_len, self.max_len)
            if pair[0] not in self.exclude:
                return pair

    def next_batch(self) -> dict:
        return encode_batch(self.vocab, [self._example() for _ in range(self.batch_size)])

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


def held_out_examples(task, n, min_len, max_len, seed=12345) -> list[tuple[str, str]]:
    """A fixed evaluation set from its own seed (never the training generator's stream)."""
    rng = np.random.default_rng(seed)
    return [make_example(task, rng, min_len, max_len) for _ in range(n)]
