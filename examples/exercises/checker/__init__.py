"""The exercise checker: the catalogue of exercises, the grading, the diagnosis of a wrong
gradient, the terminal report and the graph. `check.py` next to this folder is the command."""
