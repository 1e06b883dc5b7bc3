"""Shared training infrastructure of the example scripts (not part of the tinytensor package).

data.py           corpus, character tokenizer, train/validation split, random windows
seq2seq_tasks.py  reverse / sort / add examples made on the fly, for T5 and BART
trainer.py        the loop: progress bar, validation, checkpoints, resume, Ctrl-C
run.py            around the loop: --resume, the Ctrl-C exit status, metrics.json
checkpoint.py     atomic checkpoints through tt.save / tt.load
optimization.py   AdamW with decay on matrices only, warmup + cosine schedule
plotting.py       the loss-curve PNG
cli.py            the flags every training script shares
"""
