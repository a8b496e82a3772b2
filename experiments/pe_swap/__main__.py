from experiments.common import run_cli
from experiments.pe_swap.experiment import main

run_cli(main)
