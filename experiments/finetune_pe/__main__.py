from experiments.common import run_cli
from experiments.finetune_pe.experiment import main

run_cli(main)
