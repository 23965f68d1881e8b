"""``opi-annotate``: people score a finished sweep's answers 0-3-7, and we measure which metric agrees with them
(``flows.human.annotate``).

    opi-annotate export --out sheet.csv        # the latest sweep's answers, blind and de-duplicated
    (people fill the score column with 0, 3 or 7)
    opi-annotate import sheet.csv              # validate, then log the meta-evaluation to the sweep's parent run

Every option goes before or after the subcommand.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from flows.cli.options import Shared, completed, file_out
from flows.cli.start import add_store_arguments, console_logging, run_command, start_command


def edges(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(edge) for edge in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated numbers, e.g. 0.3333,0.6667") from None
    if list(values) != sorted(values) or not all(0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: increasing edges strictly between 0 and 1")
    return values


def sweep_arguments(parser) -> None:
    """Which sweep: accepted before and after the subcommand (``flows.cli.options``)."""
    add_store_arguments(parser)
    parser.add_argument("--sweep", help="parent run id of the sweep (default: the latest sweep)")


def export_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=Path("annotation_sheet.csv"))
    parser.add_argument("--seed", type=int, default=0, help="row shuffle (and the sample's draw)")
    parser.add_argument("--n", type=int, help="answers per configuration, drawn within relations (default: all); "
                        "the LLM judge's scores on the rest calibrate people's mean (extrinsic_calibrated)")


def import_arguments(parser) -> None:
    parser.add_argument("--brackets", type=edges, default=edges("0.3333,0.6667"),
                        help="bracket edges on [0, 1] for bracket accuracy (default: thirds)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="opi-annotate", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="write the blank annotation sheet")
    back = commands.add_parser("import", help="read a filled sheet and log the meta-evaluation")
    back.add_argument("sheet", type=Path)
    # every option goes before or after the subcommand (flows.cli.options)
    shared = [Shared(sweep_arguments), Shared(export_arguments, "export"), Shared(import_arguments, "import")]
    shared[0].add_to(parser, out, back)
    shared[1].add_to(parser, out)
    shared[2].add_to(parser, back)
    args = parser.parse_args(argv)
    completed(parser, args, args.command, *shared)
    if getattr(args, "n", None) is not None and args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    file_out(parser, args, "annotation_sheet.csv")
    return args


def main(argv: list[str] | None = None) -> None:
    start_command()
    console_logging()
    args = parse_args(argv)
    from flows.human.annotate import annotate  # after start_command: MLflow reads the environment on import

    path = args.out if args.command == "export" else args.sheet
    run_command(lambda: annotate(args.tracking_uri, args.experiment, args.sweep, args.command, path,
                                 getattr(args, "seed", 0), getattr(args, "brackets", ()), getattr(args, "n", None)))


if __name__ == "__main__":
    main()
