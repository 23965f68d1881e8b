"""``opi-nightly``: the nightly regression evaluation, as a Prefect flow with a baseline gate (``flows.nightly``).

    opi-nightly run                         # experiment=nightly once, judged against the champion baseline
    opi-nightly run --promote               # ... and make tonight's run the champion if it passed
    opi-nightly run --baseline baselines/nightly.json   # or --baseline <parent run id>
    opi-nightly serve --cron "0 2 * * *"    # a deployment on the Prefect server in PREFECT_API_URL
    opi-nightly promote <parent run id>     # move the baseline by hand
    opi-nightly export-baseline --out baselines/nightly.json   # the champion's numbers, to commit

Anything after the options is a Hydra override for the evaluation (``llm=gpt-4o``, ``dataset.limit=50``...). A
regression exits 1; a user error (bad baseline, bad override) exits 2.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from flows.cli.start import add_store_arguments, console_logging, run_command, start_command
from flows.nightly import CHAMPION, DEPLOYMENT
from opi.regression import ALPHA, TOLERANCE

log = logging.getLogger("opi")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="opi-nightly", description="Nightly regression evaluation.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "serve"):
        sub = commands.add_parser(name)
        sub.add_argument("--baseline", default=CHAMPION, help="champion (default), a parent run id, or a .json file")
        sub.add_argument("--promote", action="store_true", help="make a passing run the new champion")
        sub.add_argument("--tolerance", type=float, default=TOLERANCE, help="smallest drop that can fail the night")
        sub.add_argument("--alpha", type=float, default=ALPHA, help="significance level of the paired test")
        sub.add_argument("overrides", nargs="*", help="Hydra overrides for the sweep, e.g. llm=gpt-4o")
        if name == "serve":
            sub.add_argument("--cron", default="0 2 * * *", help="schedule (default 02:00)")
            sub.add_argument("--timezone", default="UTC")
            sub.add_argument("--name", default=DEPLOYMENT, help="deployment name")
    move = commands.add_parser("promote", help="make a sweep the nightly baseline")
    move.add_argument("sweep", help="parent run id")
    export = commands.add_parser("export-baseline", help="write a sweep's numbers as a baseline file")
    export.add_argument("--sweep", help="parent run id (default: the champion)")
    export.add_argument("--out", type=Path, required=True)
    for sub in (move, export):
        add_store_arguments(sub)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    start_command()
    console_logging("httpx")
    args = parse_args(argv)
    from flows.nightly import gate  # after start_command: Prefect and MLflow read the environment on import
    from flows.orchestration.server import run_flow

    def work() -> None:
        gated = {"baseline": args.baseline, "promote_on_pass": args.promote, "tolerance": args.tolerance,
                 "alpha": args.alpha}
        if args.command == "run":
            run_flow(gate.nightly, args.overrides, *gated.values())
        elif args.command == "serve":
            gate.serve(args.name, args.cron, args.timezone, {"overrides": args.overrides, **gated})
        elif args.command == "promote":
            gate.promote_by_hand(args.tracking_uri, args.experiment, args.sweep)
        else:
            gate.export_baseline(args.tracking_uri, args.experiment, args.sweep, args.out)

    try:
        run_command(work)
    except gate.Regression as err:
        log.error("%s", err)
        sys.exit(1)


if __name__ == "__main__":
    main()
