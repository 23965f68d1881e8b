"""``opi-nightly``: the nightly regression evaluation, as a Prefect flow with a baseline gate (``flows.nightly``).

    opi-nightly run                         # experiment=nightly once, judged against the champion baseline
    opi-nightly run --promote               # ... and make tonight's run the champion if it passed
    opi-nightly run --baseline baselines/nightly.json   # or --baseline <parent run id>
    opi-nightly serve --cron "0 2 * * *"    # a deployment on the Prefect server in PREFECT_API_URL
    opi-nightly promote <parent run id>     # move the baseline by hand
    opi-nightly export-baseline --out baselines/nightly.json   # the champion's numbers, to commit

Anything after the options is a Hydra override for the evaluation (``llm=gpt-4o``, ``dataset.limit=50``...). A
regression exits 1; a user error (bad baseline, bad override, too few examples shared with the baseline) exits 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flows.cli.options import Shared, completed, file_out
from flows.cli.start import add_store_arguments, console_logging, run_command, start_command
from flows.nightly import CHAMPION, DEPLOYMENT
from opi.regression import ALPHA, MIN_OVERLAP, TOLERANCE, UNIT

COMMANDS = {
    "run": "Evaluate experiment=nightly once and judge every configuration x metric (OPI-1, BERTSim, LRCR) against "
           "the baseline, on the examples both runs share; exits 1 on a regression.",
    "serve": "Register the opi-nightly deployment with a cron schedule on the Prefect server in PREFECT_API_URL "
             "and run it here when it is due (the same options and overrides as run).",
    "promote": "Make a sweep's parent run the nightly baseline (the run tagged opi.baseline=champion), by hand.",
    "export-baseline": "Write a sweep's numbers (the champion's by default) to a JSON baseline file you can commit "
                       "and pass as --baseline (numbers only: the tolerance alone judges against it).",
}


def gate_arguments(sub) -> None:
    """The options of run and serve (their Hydra overrides are positional: after the subcommand)."""
    sub.add_argument("--baseline", default=CHAMPION, help="champion (default), a parent run id, or a .json file")
    sub.add_argument("--promote", action="store_true", help="make a passing run the new champion")
    sub.add_argument("--tolerance", type=float, default=TOLERANCE,
                     help=f"the equivalence margin: the smallest drop that can fail the night (default {TOLERANCE})")
    sub.add_argument("--alpha", type=float, default=ALPHA,
                     help=f"significance level of the paired test, adjusted over all verdicts (default {ALPHA})")
    sub.add_argument("--min-overlap", type=float, default=MIN_OVERLAP,
                     help="the share of the baseline's examples tonight's run must have, or it is refused "
                          f"(default {MIN_OVERLAP})")
    sub.add_argument("--unit", choices=("article", "example"), default=UNIT,
                     help=f"what the paired test swaps: whole articles or single questions (default {UNIT})")


def schedule_arguments(sub) -> None:
    sub.add_argument("--cron", default="0 2 * * *", help="schedule (default 02:00)")
    sub.add_argument("--timezone", default="UTC", help="the schedule's time zone (default UTC)")
    sub.add_argument("--name", default=DEPLOYMENT, help="deployment name")


def baseline_file_arguments(sub) -> None:
    sub.add_argument("--sweep", help="parent run id (default: the champion)")
    sub.add_argument("--out", type=Path, help="the JSON file to write (required)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="opi-nightly", description="Nightly regression evaluation with a baseline "
                                     "gate (a Prefect flow; results in MLflow). Options go before or after the "
                                     "subcommand; Hydra overrides (run, serve) after it.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,serve,promote,export-baseline}")
    subs = {name: commands.add_parser(name, help=text, description=text) for name, text in COMMANDS.items()}
    # every option is accepted before and after the subcommand it applies to (flows.cli.options)
    shared = [(Shared(gate_arguments, "run", "serve"), ("run", "serve")),
              (Shared(schedule_arguments, "serve"), ("serve",)),
              (Shared(add_store_arguments, "promote", "export-baseline"), ("promote", "export-baseline")),
              (Shared(baseline_file_arguments, "export-baseline"), ("export-baseline",))]
    for options, names in shared:
        options.add_to(parser, *(subs[name] for name in names))
    for name in ("run", "serve"):
        subs[name].add_argument("overrides", nargs="*", help="Hydra overrides for the sweep, e.g. llm=gpt-4o")
    subs["promote"].add_argument("run_id", metavar="sweep", help="the sweep's parent run id")
    args = parser.parse_args(argv)
    completed(parser, args, args.command, *(options for options, _ in shared))
    if args.command == "export-baseline" and args.out is None:
        subs["export-baseline"].error("the following arguments are required: --out")
    file_out(parser, args, "baseline.json")
    return args


def gate_parameters(args: argparse.Namespace) -> dict:
    """The nightly flow's parameters, in its order."""
    return {"overrides": args.overrides, "baseline": args.baseline, "promote_on_pass": args.promote,
            "tolerance": args.tolerance, "alpha": args.alpha, "min_overlap": args.min_overlap, "unit": args.unit}


def main(argv: list[str] | None = None) -> None:
    start_command()
    console_logging("httpx")
    args = parse_args(argv)
    from flows.nightly import gate  # after start_command: Prefect and MLflow read the environment on import
    from flows.orchestration.server import run_flow

    def work() -> None:
        if args.command in ("run", "serve"):
            gate.gate_settings(args.tolerance, args.alpha, args.min_overlap, args.unit)  # before anything starts
            parameters = gate_parameters(args)
            if args.command == "run":
                run_flow(gate.nightly, *parameters.values())
            else:
                gate.serve(args.name, args.cron, args.timezone, parameters)
        elif args.command == "promote":
            gate.promote_by_hand(args.tracking_uri, args.experiment, args.run_id)
        else:
            gate.export_baseline(args.tracking_uri, args.experiment, args.sweep, args.out)

    try:
        run_command(work)
    except gate.Regression:  # its lines are logged (flows.nightly.gate.decide)
        sys.exit(1)


if __name__ == "__main__":
    main()
