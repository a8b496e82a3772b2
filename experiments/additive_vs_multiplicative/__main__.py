from experiments.common import run_cli
from experiments.additive_vs_multiplicative.experiment import main

run_cli(main)
