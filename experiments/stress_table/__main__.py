"""``python -m experiments.stress_table``: the command line of :func:`main`."""
from experiments.stress_table import main, run_cli

run_cli(main)
