#!/usr/bin/env bash
# Main job (experiments/demo.py): SmolLM2-135M-Instruct warm-started, evaluated, trained with MileGPO on
# TextWorldExpress coin and evaluated again on 2 CPU cores; curves and a JSON summary line. Arguments go
# to the demo (--config experiments/configs/demo.py: the tiny policy instead).
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec python -m experiments.demo "$@"
