"""What every training script does around `Trainer.fit`: --resume, the Ctrl-C exit, metrics.json.

result = run(trainer, args)       # args: the flags of cli.add_training_flags
if result.interrupted:
    return INTERRUPTED            # the checkpoint is saved; the hint says how to continue
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

from . import parallel
from .trainer import Trainer, TrainResult

INTERRUPTED = 130  # a program's exit status when Ctrl-C (SIGINT, signal 2) stopped it: 128 + 2


def basic_metrics(result: TrainResult) -> dict:
    """Steps, training time, throughput and the last validation metrics."""
    return {
        "steps": result.step,
        "train_seconds": result.seconds,
        "tokens_per_second": result.tokens_per_second,
        "steady_tokens_per_second": result.steady_tokens_per_second,
        **result.last_eval,
    }


def run(
    trainer: Trainer, args, metrics: Callable[[TrainResult], dict] = basic_metrics
) -> TrainResult:
    """Continues the checkpoint in --out-dir if --resume, trains, and writes `metrics(result)` to
    --out-dir/metrics.json. After Ctrl-C it prints how to continue and writes no metrics.
    In a data-parallel job only rank 0 prints and writes."""
    main = parallel.is_main()
    if args.resume:
        step = trainer.resume()
        if main and step >= args.steps:
            print(f"the run already reached --steps {args.steps}: nothing to train (pass a "
                  "larger --steps to continue it)")  # fmt: skip
        elif main:
            print(f"resuming from step {step} of {args.steps}")
    try:
        result = trainer.fit()
    except FloatingPointError as e:  # the loss diverged: one line, as for a usage error
        if main:
            print(f"{os.path.basename(sys.argv[0])}: error: {e}", file=sys.stderr)
        sys.exit(1)
    if not main:
        return result
    if result.interrupted:
        print(
            f"interrupted at step {result.step}; checkpoint {result.checkpoint_path}; "
            f"continue with: python {sys.argv[0]} --resume --out-dir {args.out_dir}"
        )
        return result
    with open(os.path.join(args.out_dir, "metrics.json"), "w") as f:
        json.dump(metrics(result), f, indent=2)
    return result
