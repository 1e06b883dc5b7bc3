"""tinytensor.models: GPT, BERT, T5 and BART."""
