"""BERT's pretraining data from plain text: documents of sentences, and random batches of
next-sentence pairs with masked characters (the corruption itself is `models.collators`').

A document is one topic of the default corpus (or one blank-line-separated block of a user's
file); its sentences end at ".", "!", "?" or ":" followed by white space, or at a line break.
"""

from __future__ import annotations

import re

import numpy as np
from tinytensor.models.collators import mask_tokens, nsp_pairs

SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+|\n+")


def split_documents(text: str, topics: list[str] | None = None, min_chars: int = 8):
    """Lists of sentences, one list per document with at least two sentences."""
    blocks = topics if topics is not None else re.split(r"\n\s*\n\s*\n", text)
    documents = []
    for block in blocks:
        sentences = [s.strip() for s in _SENTENCE_END.split(block)]
        sentences = [s for s in sentences if len(s) >= min_chars]
        if len(sentences) >= 2:
            documents.append(sentences)
    return documents


class SentencePairBatches:
    """Random `[CLS] A [SEP] B [SEP]` rows (B follows A or is from another document, 50/50)
    with `mlm_probability` (BERT: 15%) of the characters selected for masked LM, drawn from a
    generator whose state the checkpoint keeps.

    next_batch() gives int64 arrays input_ids, token_type_ids, attention_mask (B, T),
    labels (B, T; -100 where nothing is predicted) and next_sentence_label (B,).
    """

    def __init__(
        self, documents, tokenizer, batch_size: int, max_length: int, seed: int = 0,
        mlm_probability: float = 0.15,
    ):  # fmt: skip
        if len(documents) < 2:
            raise ValueError("sentence pairs need at least two documents of two sentences each")
        self.documents = [[tokenizer.encode(s) for s in doc] for doc in documents]
        self.tokenizer, self.batch_size, self.max_length = tokenizer, batch_size, max_length
        self.ids = tokenizer.special_ids
        self.mlm_probability = mlm_probability
        self.rng = np.random.default_rng(seed)

    def next_batch(self) -> dict:
        # NOTE: each pick is a two-sentence document, so nsp_pairs makes exactly one row from
        # it; a "random next sentence" then comes from another pick of the same batch.
        picks = []
        for d in self.rng.integers(0, len(self.documents), size=self.batch_size):
            doc = self.documents[d]
            i = int(self.rng.integers(0, len(doc) - 1))
            picks.append([doc[i], doc[i + 1]])
        batch = nsp_pairs(
            picks, self.max_length, self.ids["[CLS]"], self.ids["[SEP]"], self.ids["[PAD]"],
            generator=self.rng,
        )  # fmt: skip
        specials = [self.ids[name] for name in SPECIALS]
        inputs, labels = mask_tokens(
            batch["input_ids"], self.ids["[MASK]"], len(self.tokenizer.chars), specials,
            mlm_probability=self.mlm_probability, generator=self.rng,
        )  # fmt: skip
        batch["input_ids"], batch["labels"] = inputs, labels
        return batch

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
