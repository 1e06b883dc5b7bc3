"""Pretrain a tiny character-level BERT with masked LM + next-sentence prediction on the CPU.

    python examples/train_bert.py                  # ~3 minutes on 2 cores
    python examples/train_bert.py --data my_text.txt --steps 2000

Rows are `[CLS] A [SEP] B [SEP]` sentence pairs from the pydoc topics text (or --data): B is the
sentence after A or, half the time, a sentence of another document; 15% of the characters are
selected for prediction (80% [MASK], 10% random, 10% kept), as in Devlin et al. (2019). The last
10% of the documents are held out: the run reports their masked-character accuracy and the NSP
accuracy. Outputs, checkpoints, --resume and Ctrl-C work as in train_gpt.py.
"""

from __future__ import annotations

import argparse
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
from training.data import CharTokenizer, load_text_and_hash  # noqa: E402
from training.optimization import make_adamw, warmup_cosine  # noqa: E402
from training.run import INTERRUPTED, run  # noqa: E402
from training.sentence_pairs import SPECIALS, SentencePairBatches, split_documents  # noqa: E402
from training.trainer import TrainConfig, Trainer  # noqa: E402
from training.validation import (  # noqa: E402
    ScriptParser,
    check_at_least,
    check_divisible,
    check_memory,
    check_out_dir,
    dropout_probability,
    positive_int,
    selection_probability,
    transformer_activations,
)

import tinytensor as tt  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = ScriptParser(
        description="Pretrain a tiny character-level BERT (masked LM + next-sentence prediction).",
        formatter_class=HelpFormatter,
    )
    g = parser.add_argument_group("data")
    g.add_argument(
        "--data",
        default=None,
        help="a UTF-8 text file; documents are separated by two blank lines "
        "(default: Python's pydoc topics, one document per topic)",
    )
    g.add_argument(
        "--max-length",
        type=positive_int,
        default=64,
        help="characters per row, with [CLS] and two [SEP]",
    )
    g.add_argument(
        "--mlm-probability", type=selection_probability, default=0.15,
        help="fraction of the characters selected for prediction (BERT's 15%%)",
    )  # fmt: skip
    m = parser.add_argument_group("model")
    m.add_argument("--n-layer", type=positive_int, default=4, help="encoder blocks")
    m.add_argument("--n-head", type=positive_int, default=4, help="attention heads per block")
    m.add_argument("--d-model", type=positive_int, default=128, help="model width")
    m.add_argument("--dropout", type=dropout_probability, default=0.0, help="dropout probability")
    add_training_flags(parser, steps=600, batch_size=32, lr=1e-3, warmup_steps=60,
                       eval_every=100, checkpoint_every=200, out_dir="runs/bert")  # fmt: skip
    return parser


def build_model(args, tokenizer):
    from tinytensor.models.bert import BERT, BERTConfig

    config = BERTConfig(
        vocab_size=tokenizer.vocab_size,
        max_position_embeddings=args.max_length,
        n_layer=args.n_layer,
        n_head=args.n_head,
        d_model=args.d_model,
        d_ff=4 * args.d_model,
        activation="gelu_tanh",  # NOTE: the tanh GELU: the exact one's erf is ~15x slower on NumPy
        dropout=args.dropout,
        pad_token_id=tokenizer.special_ids["[PAD]"],
    )
    return BERT(config)


def to_tensors(batch: dict, device) -> dict:
    return {k: tt.tensor(v, device=device) for k, v in batch.items()}


def bert_loss(model, batch, device="cpu"):
    """Masked-LM cross-entropy + next-sentence cross-entropy."""
    return model(**to_tensors(batch, device)).loss


def make_evaluate(documents, tokenizer, args, n_batches=6, batch_size=64):
    """Masked-character accuracy, MLM loss and NSP accuracy on fixed held-out batches."""
    held_out = SentencePairBatches(
        documents, tokenizer, batch_size, args.max_length, seed=12345,
        mlm_probability=args.mlm_probability,
    )  # fmt: skip
    batches = [held_out.next_batch() for _ in range(n_batches)]

    def evaluate(model):
        import tinytensor.nn.functional as F

        correct = total = nsp_correct = rows = 0
        losses = []
        for batch in batches:
            inputs = to_tensors({k: v for k, v in batch.items() if k != "labels"}, args.device)
            out = model(**{k: v for k, v in inputs.items() if k != "next_sentence_label"})
            labels = batch["labels"]
            predicted = out.logits.numpy().argmax(axis=-1)
            chosen = labels != -100
            correct += int((predicted[chosen] == labels[chosen]).sum())
            total += int(chosen.sum())
            b, t = labels.shape
            target = tt.tensor(labels.reshape(b * t), device=args.device)
            losses.append(F.cross_entropy(out.logits.reshape(b * t, -1), target).item())
            nsp = out.nsp_logits.numpy().argmax(axis=-1)
            nsp_correct += int((nsp == batch["next_sentence_label"]).sum())
            rows += b
        return {
            "val_mlm_loss": float(np.mean(losses)),
            "masked_acc": correct / max(total, 1),
            "nsp_acc": nsp_correct / rows,
        }

    return evaluate


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # every flag is checked before any work (training/validation.py): one line, exit status 2
    check_divisible(parser, args, "d_model", "n_head")
    check_at_least(parser, args, "max_length", 5, "[CLS] A [SEP] B [SEP] with a character each")
    check_out_dir(parser, args.out_dir)
    check_device(parser, args.device)
    # --resume: the checkpoint's flags (training/cli.py)
    args, saved = resumed_args(parser, args, argv=argv)
    saved_tokenizer = CharTokenizer.from_state_dict(saved["tokenizer"]) if saved else None
    try:
        text, data_sha256 = load_text_and_hash(args.data)
    except (FileNotFoundError, ValueError) as e:
        parser.error(f"argument --data: {e}")
    if check_same_data(parser, args, saved, data_sha256):
        print(f"note: --allow-data-change: resuming on changed data {args.data or ''}")
    if args.data is None:
        from pydoc_data import topics

        documents = split_documents(text, list(topics.topics.values()))
    else:
        documents = split_documents(text)
    n_val = max(2, len(documents) // 10)
    if len(documents) - n_val < 2:
        parser.error(f"--data: found {len(documents)} documents (blocks separated by two blank "
                     "lines, each of two or more sentences); need at least 4")  # fmt: skip
    train_docs, val_docs = documents[:-n_val], documents[-n_val:]
    tokenizer = saved_tokenizer or CharTokenizer.from_text(text, specials=SPECIALS)
    unknown = sorted(set(text) - set(tokenizer.stoi))
    if unknown:  # a changed --data on --resume --allow-data-change
        parser.error(f"argument --data: characters {''.join(unknown[:20])!r} are not in the "
                     "checkpoint's vocabulary")  # fmt: skip
    d = args.d_model  # per block 12·d² (attention, MLP) + embeddings (words, positions, types)
    estimate = args.n_layer * 12 * d * d + (tokenizer.vocab_size + args.max_length + 2) * d
    activations = transformer_activations(
        args.batch_size * args.max_length, args.n_layer, d, args.n_head, args.max_length,
        tokenizer.vocab_size,
    )  # fmt: skip
    check_memory(parser, "--n-layer/--d-model/--batch-size/--max-length", estimate, activations)

    tt.manual_seed(args.seed)
    model = build_model(args, tokenizer).to(args.device)
    optimizer = make_adamw(model, args.lr, args.weight_decay)
    scheduler = warmup_cosine(optimizer, args.warmup_steps, args.steps)
    batches = SentencePairBatches(
        train_docs, tokenizer, args.batch_size, args.max_length, seed=args.seed,
        mlm_probability=args.mlm_probability,
    )  # fmt: skip
    config = TrainConfig.from_args(
        args, tokens_per_step=args.batch_size * args.max_length, desc="bert"
    )
    meta = {"args": vars(args), "tokenizer": tokenizer.state_dict(), "data_sha256": data_sha256}
    trainer = Trainer(
        model, optimizer, scheduler, batches, lambda m, b: bert_loss(m, b, args.device),
        make_evaluate(val_docs, tokenizer, args), config, meta,
    )  # fmt: skip
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"BERT: {n_params / 1e6:.2f}M parameters, {args.n_layer} layers, width {args.d_model}; "
        f"{len(train_docs)} training and {len(val_docs)} held-out documents; {args.steps} steps "
        f"of {args.batch_size} rows of {args.max_length} characters"
    )
    result = run(trainer, args)  # --resume, fit, metrics.json (training/run.py)
    if result.interrupted:
        return INTERRUPTED
    e = result.last_eval
    print(
        f"\ntrained {result.step} steps in {result.seconds:.0f} s "
        f"({result.tokens_per_second:,.0f} tokens/s): held-out masked-character accuracy "
        f"{e['masked_acc']:.1%} (MLM loss {e['val_mlm_loss']:.3f}), next-sentence accuracy "
        f"{e['nsp_acc']:.1%}"
    )
    print(f"wrote {result.checkpoint_path}, {result.plot_path or '(no plot)'} and metrics.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
