"""Train a tiny character-level GPT end to end on the CPU, then let it write.

    python examples/train_gpt.py                       # ~4 minutes on 2 cores
    python examples/train_gpt.py --data my_text.txt --max-minutes 10
    python examples/train_gpt.py --resume              # continue the run in --out-dir
    mpiexec -n 2 python examples/train_gpt.py          # data parallel: 2 processes (DDP)

The default text is Python's reference manual as the standard library ships it
(`pydoc_data.topics`, ~465k characters, 103 distinct ones); the last 10% is held out for
validation. The model is GPT-2's architecture at toy size (Radford et al., 2019), built by
`tinytensor.models.GPT`. The run writes into --out-dir: checkpoint.safetensors (model, optimizer,
schedule, RNG states, step: `--resume` continues it exactly), loss.png (train and validation loss
per step), metrics.json and sample.txt. Ctrl-C stops after the current step with a checkpoint.
Threads: every free core, fewer when the machine is busy (why and how: training/blas.py).
Under mpiexec each process trains on its share of every --batch-size batch (training/parallel.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the `training` package

from training.blas import default_to_one_blas_thread  # noqa: E402

default_to_one_blas_thread()  # before NumPy loads OpenBLAS: see training/blas.py

import numpy as np  # noqa: E402
from training import parallel  # noqa: E402
from training.cli import (  # noqa: E402
    HelpFormatter,
    add_training_flags,
    check_device,
    check_same_data,
    resumed_args,
)
from training.data import (  # noqa: E402
    CharTokenizer,
    RandomWindows,
    fixed_windows,
    load_text_and_hash,
    split_train_val,
)
from training.optimization import make_adamw, warmup_cosine  # noqa: E402
from training.run import INTERRUPTED, run  # noqa: E402
from training.trainer import TrainConfig, Trainer  # noqa: E402
from training.validation import (  # noqa: E402
    ScriptParser,
    check_at_least,
    check_divisible,
    check_memory,
    check_out_dir,
    dropout_probability,
    non_empty_text,
    non_negative_float,
    non_negative_int,
    open_fraction,
    positive_int,
    transformer_activations,
)

import tinytensor as tt  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = ScriptParser(
        description="Train a tiny character-level GPT and print text it generates.",
        formatter_class=HelpFormatter,
    )
    g = parser.add_argument_group("data")
    g.add_argument(
        "--data",
        default=None,
        help="a UTF-8 text file to train on (default: Python's pydoc topics text)",
    )
    g.add_argument(
        "--val-fraction",
        type=open_fraction,
        default=0.1,
        help="the final fraction of the text held out for validation",
    )
    m = parser.add_argument_group("model")
    m.add_argument("--n-layer", type=positive_int, default=4, help="Transformer blocks")
    m.add_argument("--n-head", type=positive_int, default=4, help="attention heads per block")
    m.add_argument("--n-embd", type=positive_int, default=128, help="model width")
    m.add_argument(
        "--block-size", type=positive_int, default=64, help="context length in characters"
    )
    m.add_argument("--dropout", type=dropout_probability, default=0.0, help="dropout probability")
    add_training_flags(
        parser,
        steps=700,
        batch_size=32,
        lr=3e-3,
        warmup_steps=50,
        max_minutes=4.5,  # a safety net: ~3.5 minutes of training on an idle 2-core machine
        eval_every=100,
        checkpoint_every=200,
        out_dir="runs/gpt",
    )
    s = parser.add_argument_group("sampling")
    s.add_argument(
        "--prompt",
        type=non_empty_text,
        default=None,
        help="text the sample starts from (default: 'The \"' if the text has those "
        "characters, else its first 8 characters)",
    )
    s.add_argument(
        "--sample-chars", type=non_negative_int, default=600, help="characters to generate"
    )
    s.add_argument(
        "--temperature",
        type=non_negative_float,
        default=0.8,
        help="sampling temperature (0: greedy, the most likely character each time)",
    )
    return parser


def build_model(args, vocab_size: int):
    from tinytensor.models.gpt import GPT, GPTConfig

    config = GPTConfig(
        vocab_size=vocab_size,
        block_size=args.block_size,
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        dropout=args.dropout,
        bos_token_id=None,  # characters only: no document markers
        eos_token_id=None,
    )
    return GPT(config)


def lm_loss(model, batch, device="cpu"):
    """Mean next-character cross-entropy of a (x, y) batch of windows (nats per character)."""
    x, y = batch
    return model(tt.tensor(x, device=device), tt.tensor(y, device=device)).loss


def make_evaluate(val_ids, block_size, device, max_windows=64, batch_size=32):
    """Validation loss on up to `max_windows` fixed windows of the held-out text."""
    val_x, val_y = fixed_windows(val_ids, block_size, max_windows)

    def evaluate(model):
        losses, counts = [], []
        for i in range(0, len(val_x), batch_size):
            batch = (val_x[i : i + batch_size], val_y[i : i + batch_size])
            losses.append(lm_loss(model, batch, device).item())
            counts.append(len(batch[0]))
        return {"val_loss": float(np.average(losses, weights=counts))}

    return evaluate


def default_prompt(tokenizer, text) -> str:
    prompt = 'The "'  # how every topic of the default corpus starts
    return prompt if all(ch in tokenizer.stoi for ch in prompt) else text[:8]


def gpt_parameter_count(args, vocab_size: int) -> int:
    """GPT's parameters: per block 4·C² (attention) + 8·C² (MLP) + 13·C (biases, norms), plus
    the token and position embeddings (the LM head is tied to the token embedding)."""
    c = args.n_embd
    return args.n_layer * (12 * c * c + 13 * c) + (vocab_size + args.block_size) * c + 2 * c


def sample_text(model, tokenizer, prompt, n_chars, temperature, block_size, device, seed=0):
    """Continues `prompt` by `n_chars` sampled characters, sliding the context window along.
    Temperature 0 is greedy decoding (the most likely character every time)."""
    generator = tt.Generator(seed)
    ids = tokenizer.encode(prompt)[None, :]  # (1, T)
    model.eval()
    with tt.no_grad():
        while ids.shape[1] < len(prompt) + n_chars:
            # NOTE: positions are learned only up to block_size, so each call sees at most the
            # last half block of context and adds the other half.
            context = ids[:, -(block_size // 2) :]
            wanted = min(block_size - context.shape[1], len(prompt) + n_chars - ids.shape[1])
            out = model.generate(
                tt.tensor(context, device=device), max_new_tokens=wanted,
                do_sample=temperature > 0, temperature=temperature, generator=generator,
            )  # fmt: skip
            ids = np.concatenate([ids, out.numpy()[:, context.shape[1] :]], axis=1)
    return tokenizer.decode(ids[0])


def gpt_metrics(result, n_params: int) -> dict:
    """What metrics.json records of a finished run."""
    return {
        "steps": result.step,
        "train_loss": float(np.mean(result.history["train_loss"][-50:])),  # the last 50 steps
        "val_loss": result.last_eval.get("val_loss", float("nan")),
        "train_seconds": result.seconds,
        "tokens_per_second": result.tokens_per_second,
        "steady_tokens_per_second": result.steady_tokens_per_second,
        "parameters": n_params,
        "stopped_by_time_limit": result.timed_out,
    }


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # every flag is checked before any work (training/validation.py): one line, exit status 2
    check_divisible(parser, args, "n_embd", "n_head")
    check_at_least(parser, args, "block_size", 2, "samples continue from half a block")
    check_out_dir(parser, args.out_dir)
    check_device(parser, args.device)
    # --resume: the checkpoint's flags, except run control, sampling and a larger --steps
    sampling = ("prompt", "sample_chars", "temperature")
    args, saved = resumed_args(parser, args, also=sampling, argv=argv)
    parallel.start()  # under mpiexec: join the job (data parallel); alone: nothing
    main_rank = parallel.is_main()  # rank 0 alone prints and writes
    saved_tokenizer = CharTokenizer.from_state_dict(saved["tokenizer"]) if saved else None
    try:
        text, data_sha256 = load_text_and_hash(args.data)
    except (FileNotFoundError, ValueError) as e:
        parser.error(f"argument --data: {e}")
    if check_same_data(parser, args, saved, data_sha256) and main_rank:
        print(f"note: --allow-data-change: resuming on changed data {args.data or ''}")
    tokenizer = saved_tokenizer or CharTokenizer.from_text(text)
    try:
        ids = tokenizer.encode(text)
        train_ids, val_ids = split_train_val(ids, args.val_fraction)
        RandomWindows(val_ids, args.block_size, 1)  # fails early if validation is too short
    except ValueError as e:
        where = " (the checkpoint's vocabulary)" if saved_tokenizer else ""
        parser.error(f"argument --data: {e}{where}")
    prompt = default_prompt(tokenizer, text) if args.prompt is None else args.prompt
    unknown = sorted(set(prompt) - set(tokenizer.stoi))
    if unknown:
        parser.error(f"argument --prompt: characters {''.join(unknown)!r} do not occur in the text")
    activations = transformer_activations(
        args.batch_size * args.block_size, args.n_layer, args.n_embd, args.n_head,
        args.block_size, tokenizer.vocab_size,
    )  # fmt: skip
    check_memory(
        parser, "--n-layer/--n-embd/--batch-size/--block-size",
        gpt_parameter_count(args, tokenizer.vocab_size), activations,
    )  # fmt: skip

    tt.manual_seed(args.seed)
    model = build_model(args, tokenizer.vocab_size).to(args.device)
    if parallel.world_size() > 1:  # each rank its own dropout masks (weights: rank 0's, by DDP)
        tt.manual_seed(parallel.rank_seed(args.seed))
    optimizer = make_adamw(model, args.lr, args.weight_decay)
    scheduler = warmup_cosine(optimizer, args.warmup_steps, args.steps)
    batches = RandomWindows(
        train_ids, args.block_size, parallel.per_rank_batch(args.batch_size),
        seed=parallel.rank_seed(args.seed),
    )  # fmt: skip
    config = TrainConfig.from_args(
        args, tokens_per_step=args.batch_size * args.block_size, desc="gpt"
    )
    meta = {"args": vars(args), "tokenizer": tokenizer.state_dict(), "data_sha256": data_sha256}
    trainer = Trainer(
        parallel.wrap(model), optimizer, scheduler, batches,
        lambda m, b: lm_loss(m, b, args.device),
        make_evaluate(val_ids, args.block_size, args.device), config, meta,
    )  # fmt: skip
    n_params = sum(p.numel() for p in model.parameters())
    if main_rank:
        print(
            f"GPT: {n_params / 1e6:.2f}M parameters, {args.n_layer} layers, width {args.n_embd}, "
            f"context {args.block_size}; text {len(ids):,} characters, vocabulary "
            f"{tokenizer.vocab_size}; {args.steps} steps of {args.batch_size}x{args.block_size} "
            "tokens"
            + (f" on {parallel.world_size()} processes" if parallel.world_size() > 1 else "")
        )
    start = time.perf_counter()
    # --resume, fit, metrics.json (training/run.py)
    result = run(trainer, args, metrics=lambda r: gpt_metrics(r, n_params))
    if result.interrupted:
        return INTERRUPTED
    if not main_rank:
        return 0
    metrics = gpt_metrics(result, n_params)  # what metrics.json holds
    train_loss, val_loss = metrics["train_loss"], metrics["val_loss"]
    sample = sample_text(
        model,
        tokenizer,
        prompt,
        args.sample_chars,
        args.temperature,
        args.block_size,
        args.device,
        seed=args.seed,
    )
    with open(os.path.join(args.out_dir, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(sample)
    if result.timed_out:
        print(f"stopped by --max-minutes {args.max_minutes} at step {result.step}")
    if result.paused:
        print(f"stopped by --stop-at-step at step {result.step}: --resume continues the run")
    print(
        f"\ntrained {result.step} steps in {result.seconds:.0f} s "
        f"({result.tokens_per_second:,.0f} tokens/s): train loss {train_loss:.3f}, "
        f"validation loss {val_loss:.3f} nats/char ({val_loss / np.log(2):.2f} bits/char)"
    )
    print(
        f"wrote {result.checkpoint_path}, {result.plot_path or '(no plot)'}, metrics.json, "
        f"sample.txt in {args.out_dir}  ({time.perf_counter() - start:.0f} s with sampling)"
    )
    how = f"temperature {args.temperature}" if args.temperature > 0 else "greedy: temperature 0"
    print(f"\n--- generated ({how}) ---\n{sample}\n---")
    return 0


if __name__ == "__main__":
    sys.exit(main())
