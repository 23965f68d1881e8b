"""``opi-label``: people label the relations of a sample of a dataset that has none (``flows.human.label``).

    opi-label export --n 200 --out sheet.csv [hydra overrides: dataset=table dataset.path=... ]
    (people fill the relation column, reading sheet.definitions.md)
    opi-label import sheet.csv [--out labels.csv] [the same overrides, and the classifier to compare with]
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from flows.cli.start import console_logging, run_command, start_command
from flows.run.errors import EXIT_USER_ERROR

log = logging.getLogger("opi")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="opi-label", description="Label relations by hand, for data without.")
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="a sheet of examples to label")
    out.add_argument("--n", type=int, default=200, help="how many examples (a seeded sample)")
    out.add_argument("--out", type=Path, default=Path("relations_sheet.csv"))
    out.add_argument("--seed", type=int, default=0)
    back = commands.add_parser("import", help="a filled sheet -> label file + agreement with the classifier")
    back.add_argument("sheet", type=Path)
    back.add_argument("--out", type=Path, help="label file to write (default: <sheet>.labels.csv)")
    parser.epilog = "Anything else is a Hydra override naming the data (and classifier): dataset=table dataset.path=..."
    args, rest = parser.parse_known_args(argv)
    unknown = [a for a in rest if "=" not in a or a.startswith("-")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "export" and args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    args.overrides = rest
    return args


def main(argv: list[str] | None = None) -> None:
    start_command()
    console_logging()
    args = parse_args(argv)
    from flows.human import label  # after start_command: Prefect and MLflow read the environment on import

    try:
        config = label.compose(args.overrides)
    except Exception as err:  # a typo in an override: Hydra's own message (or a range check), one line
        log.error("invalid configuration: %s", str(err).splitlines()[0])
        sys.exit(EXIT_USER_ERROR)
    if args.command == "export":
        run_command(lambda: label.export(config, args.n, args.out, args.seed))
    else:
        run_command(lambda: label.import_sheet(config, args.sheet, args.out or args.sheet.with_suffix(".labels.csv")))


if __name__ == "__main__":
    main()
