"""``opi-label``: people label the relations of a sample of a dataset that has none (``flows.human.label``), or of
a finished sweep's generated answers, which calibrates its LRCR (``flows.human.answers``).

    opi-label export --n 200 --out sheet.csv [hydra overrides: dataset=table dataset.path=... ]
    (people fill the relation column, reading sheet.definitions.md)
    opi-label import sheet.csv [--out labels.csv] [the same overrides, and the classifier to compare with]

    opi-label answers export [--sweep <parent run id>] --n 40 --out answers_sheet.csv
    opi-label answers import answers_sheet.csv [--sweep <parent run id>]
    opi-label answers plan [--sweep <parent run id>] --width 0.05
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from flows.cli.start import add_store_arguments, console_logging, run_command, start_command
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
    answers = commands.add_parser("answers", help="label a finished sweep's generated answers: calibrated LRCR")
    actions = answers.add_subparsers(dest="action", required=True)
    for action, text in (("export", "a blind sheet of each configuration's answers"),
                         ("import", "a filled sheet -> calibrated LRCR on each configuration's run"),
                         ("plan", "how many labels give an interval of a given half-width")):
        sub = actions.add_parser(action, help=text)
        add_store_arguments(sub)
        sub.add_argument("--sweep", help="parent run id of the sweep (default: the latest sweep)")
        sub.add_argument("--seed", type=int, default=0)
        if action == "export":
            sub.add_argument("--n", type=int, default=40, help="answers per configuration (drawn within relations)")
            sub.add_argument("--out", type=Path, default=Path("answers_sheet.csv"))
        elif action == "import":
            sub.add_argument("sheet", type=Path)
        else:
            sub.add_argument("--width", type=float, default=0.05, help="interval half-width (95 %%)")
    parser.epilog = "Anything else is a Hydra override naming the data (and classifier): dataset=table dataset.path=..."
    args, rest = parser.parse_known_args(argv)
    if args.command == "answers":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if getattr(args, "n", 1) < 1:
            parser.error(f"--n must be >= 1, got {args.n}")
        if not 0 < getattr(args, "width", 0.5) < 1:
            parser.error(f"--width must be in (0, 1), got {args.width}")
        return args
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
    if args.command == "answers":
        from flows.human.answers import answers_command  # after start_command, as below

        path = getattr(args, "out", None) or getattr(args, "sheet", None)
        run_command(lambda: answers_command(args.tracking_uri, args.experiment, args.sweep, args.action, path,
                                            getattr(args, "n", 0), args.seed, getattr(args, "width", 0.05)))
        return
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
