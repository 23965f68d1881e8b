"""``opi-report``: the report of any finished sweep, logged to its parent run (and copied to a folder).

    opi-report                       # the latest sweep in mlruns/mlflow.db
    opi-report --sweep <run id> --out report/ --resamples 5000 --alpha 0.01
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from flows.cli.start import add_store_arguments, console_logging, run_command, start_command
from opi.schemas import ReportConfig


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    defaults = ReportConfig()
    parser = argparse.ArgumentParser(prog="opi-report", description="Build the report of a finished sweep.")
    add_store_arguments(parser)
    parser.add_argument("--sweep", help="parent run id of the sweep (default: the latest sweep)")
    parser.add_argument("--out", type=Path, help="also write the report to this folder")
    parser.add_argument("--beta", type=float, help="the OPI β to rank by (default: the sweep's metrics.beta)")
    parser.add_argument("--confidence", type=float, default=defaults.confidence)
    parser.add_argument("--resamples", type=int, default=defaults.resamples)
    parser.add_argument("--alpha", type=float, default=defaults.alpha)
    parser.add_argument("--permutations", type=int, default=defaults.permutations)
    parser.add_argument("--seed", type=int, help="bootstrap and permutation seed (default: the sweep's seed)")
    args = parser.parse_args(argv)
    try:
        ReportConfig(True, args.confidence, args.resamples, args.alpha, args.permutations)
        if args.beta is not None and not (args.beta > 0 and math.isfinite(args.beta)):
            raise ValueError(f"--beta must be a finite number > 0, got {args.beta}")
        if args.seed is not None and args.seed < 0:
            raise ValueError(f"--seed must be a whole number >= 0, got {args.seed}")
    except ValueError as err:
        parser.error(str(err).replace("report.", "--"))  # the options' names, not the config's
    return args


def main(argv: list[str] | None = None) -> None:
    start_command()
    console_logging("matplotlib")
    args = parse_args(argv)
    from flows.tracking.sweep_report import report_of_sweep  # after start_command: MLflow reads the environment

    config = ReportConfig(True, args.confidence, args.resamples, args.alpha, args.permutations)
    run_command(lambda: report_of_sweep(args.tracking_uri, args.experiment, args.sweep, args.out, config, args.beta,
                                        args.seed))


if __name__ == "__main__":
    main()
