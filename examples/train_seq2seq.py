"""Train a tiny T5 or BART on a sequence-to-sequence task made on the fly, on the CPU.

    python examples/train_seq2seq.py --model t5                  # sort letters, ~1 minute
    python examples/train_seq2seq.py --model bart --task reverse
    python examples/train_seq2seq.py --model bart --task denoise # BART's pretraining objective

Tasks (examples/training/seq2seq_tasks.py): `reverse` ("k3f9a" -> "a9f3k"), `sort` (distinct
letters into alphabetical order), `add` ("457+86" -> "543"). The score is the exact-match accuracy
of greedy decoding on held-out examples that training never sees. `denoise` (BART only) trains on
the pydoc topics text (or --data) with BART's text infilling (Lewis et al., 2020): spans of
Poisson(3) characters become one <mask>; it reports the held-out reconstruction loss and the
character accuracy of the teacher-forced reconstruction. Outputs, checkpoints, --resume and
Ctrl-C work as in train_gpt.py.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the `training` package

from training.blas import default_to_one_blas_thread  # noqa: E402

default_to_one_blas_thread()  # before NumPy loads OpenBLAS: see training/blas.py

import numpy as np  # noqa: E402
from training.cli import (  # noqa: E402
    HelpFormatter,
    add_training_flags,
    check_device,
    check_same_data,
    resumed_args,
)
from training.data import CharTokenizer, load_text_and_hash, split_train_val  # noqa: E402
from training.optimization import make_adamw, warmup_cosine  # noqa: E402
from training.run import INTERRUPTED, run  # noqa: E402
from training.seq2seq_tasks import (  # noqa: E402
    BOS,
    EOS,
    PAD,
    Seq2SeqBatches,
    TaskVocab,
    encode_batch,
    held_out_examples,
)
from training.trainer import TrainConfig, Trainer  # noqa: E402
from training.validation import (  # noqa: E402
    ScriptParser,
    check_at_most,
    check_divisible,
    check_memory,
    check_out_dir,
    dropout_probability,
    positive_int,
    transformer_activations,
)

import tinytensor as tt  # noqa: E402

DENOISE_SPECIALS = ("<pad>", "<s>", "</s>", "<mask>")


def build_parser() -> argparse.ArgumentParser:
    parser = ScriptParser(
        description="Train a tiny T5 or BART on reverse / sort / add, or BART on denoising.",
        formatter_class=HelpFormatter,
    )
    g = parser.add_argument_group("task")
    g.add_argument("--model", choices=("t5", "bart"), default="t5", help="the architecture")
    g.add_argument(
        "--task",
        choices=("reverse", "sort", "add", "denoise"),
        default="sort",
        help="what to learn (denoise: BART only)",
    )
    g.add_argument(
        "--min-len", type=positive_int, default=3, help="shortest task input (characters)"
    )
    g.add_argument(
        "--max-len", type=positive_int, default=8, help="longest task input (characters)"
    )
    g.add_argument(
        "--eval-examples", type=positive_int, default=300, help="held-out examples to score"
    )
    g.add_argument(
        "--data",
        default=None,
        help="denoise only: a UTF-8 text file (default: Python's pydoc topics)",
    )
    g.add_argument(
        "--window", type=positive_int, default=48, help="denoise only: characters per row"
    )
    m = parser.add_argument_group("model")
    m.add_argument(
        "--n-layer", type=positive_int, default=2, help="encoder blocks (and decoder blocks)"
    )
    m.add_argument("--n-head", type=positive_int, default=4, help="attention heads per block")
    m.add_argument("--d-model", type=positive_int, default=128, help="model width")
    m.add_argument("--dropout", type=dropout_probability, default=0.0, help="dropout probability")
    add_training_flags(parser, steps=600, batch_size=64, lr=2e-3, warmup_steps=50,
                       eval_every=100, checkpoint_every=200, out_dir=None)  # fmt: skip
    return parser


def build_model(args, vocab_size: int, pad: int, bos: int, eos: int):
    if args.model == "t5":
        from tinytensor.models.t5 import T5, T5Config

        config = T5Config(
            vocab_size=vocab_size, d_model=args.d_model, d_kv=args.d_model // args.n_head,
            d_ff=4 * args.d_model, n_layer=args.n_layer, n_head=args.n_head,
            dropout=args.dropout, pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=bos,
        )  # fmt: skip
        return T5(config)
    from tinytensor.models.bart import BART, BARTConfig

    config = BARTConfig(
        vocab_size=vocab_size, max_position_embeddings=256, d_model=args.d_model,
        n_layer=args.n_layer, n_head=args.n_head, d_ff=4 * args.d_model,
        activation="gelu_tanh",  # NOTE: the exact GELU's erf is ~15x slower on NumPy
        dropout=args.dropout, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos,
        decoder_start_token_id=bos,
    )  # fmt: skip
    return BART(config)


def seq2seq_loss(model, batch, device="cpu"):
    """Teacher-forced cross-entropy of the target characters (and </s>)."""
    names = ("input_ids", "attention_mask", "decoder_input_ids", "labels")
    return model(**{k: tt.tensor(batch[k], device=device) for k in names}).loss


class DenoisingBatches:
    """Random windows of the text, noised by BART's text infilling (models.collators)."""

    def __init__(self, ids, tokenizer, window, batch_size, seed=0):
        self.ids, self.window, self.batch_size = ids, window, batch_size
        self.special = tokenizer.special_ids
        self.rng = np.random.default_rng(seed)

    def next_batch(self) -> dict:
        from tinytensor.models.collators import bart_denoising_batch

        starts = self.rng.integers(0, len(self.ids) - self.window, size=self.batch_size)
        rows = [self.ids[s : s + self.window] for s in starts]
        s = self.special
        return bart_denoising_batch(
            rows, s["<s>"], s["</s>"], s["<pad>"], s["<mask>"], s["<s>"], generator=self.rng
        )

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


def make_task_evaluate(args, vocab, examples, batch_size=100):
    """Exact match of greedy decoding, and the teacher-forced loss, on held-out examples."""
    max_target = max(len(t) for _, t in examples) + 1  # + </s>

    def evaluate(model):
        hits, losses = 0, []
        for i in range(0, len(examples), batch_size):
            chunk = examples[i : i + batch_size]
            batch = encode_batch(vocab, chunk)
            losses.append(seq2seq_loss(model, batch, args.device).item())
            out = model.generate(
                tt.tensor(batch["input_ids"], device=args.device), max_new_tokens=max_target,
                attention_mask=tt.tensor(batch["attention_mask"], device=args.device),
            ).numpy()  # fmt: skip
            hits += sum(vocab.decode(row[1:]) == target for row, (_, target) in zip(out, chunk))
        return {"val_loss": float(np.mean(losses)), "exact_match": hits / len(examples)}

    return evaluate


def make_denoise_evaluate(args, val_ids, tokenizer, n_rows=64):
    """Held-out reconstruction loss and teacher-forced character accuracy on fixed windows."""
    held_out = DenoisingBatches(val_ids, tokenizer, args.window, n_rows, seed=12345).next_batch()

    def evaluate(model):
        names = ("input_ids", "attention_mask", "decoder_input_ids", "labels")
        out = model(**{k: tt.tensor(held_out[k], device=args.device) for k in names})
        labels = held_out["labels"]
        predicted = out.logits.numpy().argmax(axis=-1)
        scored = labels != -100
        accuracy = float((predicted[scored] == labels[scored]).mean())
        return {"val_loss": out.loss.item(), "char_acc": accuracy}

    return evaluate


def show_reconstructions(model, val_ids, tokenizer, args, n=2):
    """Prints held-out windows, their noised form (▁ = <mask>) and the greedy reconstruction."""
    batch = DenoisingBatches(val_ids, tokenizer, args.window, n, seed=999).next_batch()
    out = model.generate(
        tt.tensor(batch["input_ids"], device=args.device), max_new_tokens=args.window + 2,
        attention_mask=tt.tensor(batch["attention_mask"], device=args.device),
    ).numpy()  # fmt: skip
    mask = tokenizer.special_ids["<mask>"]

    def text(ids):
        shown = "".join("▁" if i == mask else tokenizer.decode([i]) for i in ids)
        return repr(shown)

    for source, labels, row in zip(batch["input_ids"], batch["labels"], out):
        print(f"  noised:   {text(source)}")
        print(f"  rebuilt:  {text(row[1:])}")
        print(f"  original: {text(labels[labels != -100])}")


def distinct_sources(task: str, min_len: int, max_len: int) -> int:
    """How many different inputs `make_example(task, ...)` can draw (at least 10**20 counts as
    plenty: the sums stop there)."""
    max_len = min(max_len, min_len + 20)
    if task == "reverse":
        return sum(36**n for n in range(min_len, max_len + 1))
    if task == "sort":
        return sum(math.comb(26, n) for n in range(min_len, min(max_len, 26) + 1))
    digits = max(1, (max_len - 1) // 2)  # add: operands of up to `digits` digits
    return 10 ** (2 * digits)


def check_inputs_left(parser, args, examples) -> None:
    """Training draws only inputs outside the held-out set: some must be left, or the batch
    sampler would search forever."""
    total, held = distinct_sources(args.task, args.min_len, args.max_len), len(set(examples))
    if total - held < max(10, total // 10):
        parser.error(
            f"argument --max-len: --task {args.task} has {total} distinct inputs of "
            f"{args.min_len}..{args.max_len} characters and --eval-examples holds out {held} of "
            "them, leaving too few to train on; raise --max-len or lower --eval-examples"
        )


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.out_dir is None:
        args.out_dir = os.path.join("runs", f"{args.model}-{args.task}")
    check_out_dir(parser, args.out_dir)
    check_device(parser, args.device)
    # --resume: the checkpoint's flags (training/cli.py)
    args, saved = resumed_args(parser, args, argv=argv)
    saved_tokenizer = None  # denoise runs save their tokenizer; the tasks' vocabularies are fixed
    if "tokenizer" in saved:
        saved_tokenizer = CharTokenizer.from_state_dict(saved["tokenizer"])
    if args.task == "denoise" and args.model != "bart":
        parser.error("--task denoise is BART's pretraining objective: use --model bart")
    if args.task != "denoise" and args.data is not None:
        parser.error("--data is for --task denoise; the other tasks make their own examples")
    if not 1 <= args.min_len <= args.max_len:
        parser.error(f"--min-len {args.min_len} and --max-len {args.max_len}: need 1 <= min <= max")
    check_divisible(parser, args, "d_model", "n_head")
    if args.model == "bart":  # BART's positions are learned up to max_position_embeddings
        check_at_most(parser, args, "max_len", 254, "BART learns 256 positions: <s>, </s>")
        check_at_most(parser, args, "window", 254, "BART learns 256 positions: <s>, </s>")
    check_at_most(parser, args, "max_len", 4096, "longer rows do not fit a CPU example")
    if args.task == "sort":
        check_at_most(parser, args, "min_len", 26, "sort uses distinct letters")
    check_at_most(parser, args, "eval_examples", 100_000, "every evaluation decodes them all")
    d = args.d_model  # per layer pair ~ 4·d² + 8·d² (encoder) + 4·d² more (cross-attention)
    length = (args.window if args.task == "denoise" else args.max_len) + 2  # <s>, </s>
    activations = transformer_activations(
        2 * args.batch_size * length, 2 * args.n_layer, d, args.n_head, length, 512
    )  # encoder and decoder; a vocabulary of at most 512 characters
    check_memory(parser, "--n-layer/--d-model/--batch-size", args.n_layer * 28 * d * d, activations)

    meta = {"args": vars(args)}
    if args.task == "denoise":
        try:
            text, data_sha256 = load_text_and_hash(args.data)
        except (FileNotFoundError, ValueError) as e:
            parser.error(f"argument --data: {e}")
        if check_same_data(parser, args, saved, data_sha256):
            print(f"note: --allow-data-change: resuming on changed data {args.data or ''}")
        tokenizer = saved_tokenizer or CharTokenizer.from_text(text, specials=DENOISE_SPECIALS)
        try:
            train_ids, val_ids = split_train_val(tokenizer.encode(text), 0.1)
        except ValueError as e:
            parser.error(f"argument --data: {e}")
        if len(val_ids) <= args.window or len(train_ids) <= args.window:
            parser.error(
                f"argument --window: {args.window} characters do not fit in the held-out 10% of "
                f"the text ({len(val_ids)} characters); lower it or pass a longer --data"
            )
        meta["data_sha256"] = data_sha256
        ids = tokenizer.special_ids
        vocab_size, pad, bos, eos = tokenizer.vocab_size, ids["<pad>"], ids["<s>"], ids["</s>"]
        batches = DenoisingBatches(train_ids, tokenizer, args.window, args.batch_size, args.seed)
        evaluate = make_denoise_evaluate(args, val_ids, tokenizer)
        tokens_per_step = 2 * args.batch_size * args.window
        meta["tokenizer"] = tokenizer.state_dict()
    else:
        vocab = TaskVocab(args.task)
        vocab_size, pad, bos, eos = vocab.vocab_size, PAD, BOS, EOS
        examples = held_out_examples(args.task, args.eval_examples, args.min_len, args.max_len)
        check_inputs_left(parser, args, examples)
        batches = Seq2SeqBatches(args.task, vocab, args.batch_size, args.min_len, args.max_len,
                                 seed=args.seed, exclude=examples)  # fmt: skip
        evaluate = make_task_evaluate(args, vocab, examples)
        tokens_per_step = 2 * args.batch_size * (args.min_len + args.max_len) // 2

    tt.manual_seed(args.seed)
    model = build_model(args, vocab_size, pad, bos, eos).to(args.device)
    optimizer = make_adamw(model, args.lr, args.weight_decay)
    scheduler = warmup_cosine(optimizer, args.warmup_steps, args.steps)
    config = TrainConfig.from_args(
        args, tokens_per_step=tokens_per_step, desc=f"{args.model}-{args.task}"
    )
    trainer = Trainer(
        model, optimizer, scheduler, batches, lambda m, b: seq2seq_loss(m, b, args.device),
        evaluate, config, meta,
    )  # fmt: skip
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"{args.model.upper()}: {n_params / 1e6:.2f}M parameters, {args.n_layer}+{args.n_layer} "
        f"layers, width {args.d_model}; task {args.task}; {args.steps} steps of "
        f"{args.batch_size} examples"
    )
    result = run(trainer, args)  # --resume, fit, metrics.json (training/run.py)
    if result.interrupted:
        return INTERRUPTED
    e = result.last_eval
    if args.task == "denoise":
        score = (
            f"held-out reconstruction loss {e['val_loss']:.3f}, char accuracy {e['char_acc']:.1%}"
        )
    else:
        score = f"held-out exact match {e['exact_match']:.1%} (val loss {e['val_loss']:.3f})"
    print(f"\ntrained {result.step} steps in {result.seconds:.0f} s: {score}")
    if args.task != "denoise":
        show = examples[:5]
        batch = encode_batch(vocab, show)
        out = model.generate(
            tt.tensor(batch["input_ids"], device=args.device), max_new_tokens=args.max_len + 2,
            attention_mask=tt.tensor(batch["attention_mask"], device=args.device),
        ).numpy()  # fmt: skip
        for (src, target), row in zip(show, out):
            got = vocab.decode(row[1:])
            print(f"  {src:>12} -> {got:<12} {'ok' if got == target else 'expected ' + target}")
    else:
        show_reconstructions(model, val_ids, tokenizer, args)
    print(f"wrote {result.checkpoint_path}, {result.plot_path or '(no plot)'} and metrics.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
