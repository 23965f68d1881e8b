"""``opi-label``: people label the relations of a sample of a dataset that has none (``flows.human.label``), or of
a finished sweep's generated answers, which calibrates its LRCR (``flows.human.answers``).

    opi-label export --n 200 --out sheet.csv [hydra overrides: dataset=table dataset.path=... ]
    (people fill the relation column, reading sheet.definitions.md)
    opi-label import sheet.csv [--out labels.csv] [the same overrides, and the classifier to compare with]

    opi-label answers export [--sweep <parent run id>] --n 40 --out answers_sheet.csv
    opi-label answers import answers_sheet.csv [--sweep <parent run id>]
    opi-label answers plan [--sweep <parent run id>] --width 0.05

Every option goes before or after the subcommand (and its action).
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from flows.cli.options import Shared, completed, file_out
from flows.cli.start import add_store_arguments, console_logging, run_command, start_command
from flows.base.errors import EXIT_USER_ERROR

log = logging.getLogger("opi")


def sweep_arguments(parser) -> None:
    """Which sweep ``opi-label answers`` reads."""
    add_store_arguments(parser)
    parser.add_argument("--sweep", help="parent run id of the sweep (default: the latest sweep)")


def seed_argument(parser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="the sample's draw and the rows' order (default 0)")


def export_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=200, help="how many examples (a seeded sample)")
    parser.add_argument("--out", type=Path, default=Path("relations_sheet.csv"))


def import_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, help="label file to write (default: <sheet>.labels.csv)")


def answers_export_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=40, help="answers per configuration (drawn within relations)")
    parser.add_argument("--out", type=Path, default=Path("answers_sheet.csv"))


def plan_arguments(parser) -> None:
    parser.add_argument("--width", type=float, default=0.05, help="interval half-width (95 %%)")


ANSWERS = {"export": ("a blind sheet of each configuration's answers", answers_export_arguments),
           "import": ("a filled sheet -> calibrated LRCR on each configuration's run", None),
           "plan": ("how many labels give an interval of a given half-width", plan_arguments)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="opi-label", description="Label relations by hand, for data without.")
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="a sheet of examples to label")
    back = commands.add_parser("import", help="a filled sheet -> label file + agreement with the classifier")
    back.add_argument("sheet", type=Path)
    answers = commands.add_parser("answers", help="label a finished sweep's generated answers: calibrated LRCR")
    actions = answers.add_subparsers(dest="action", required=True)
    subs = {action: actions.add_parser(action, help=text) for action, (text, _) in ANSWERS.items()}
    subs["import"].add_argument("sheet", type=Path)
    # every option goes before or after the subcommand, and its action (flows.cli.options): each where it applies
    every = [f"answers {action}" for action in ANSWERS]
    shared = [(Shared(sweep_arguments, *every), [parser, answers, *subs.values()]),
              (Shared(seed_argument, "export", *every), [parser, out, answers, *subs.values()]),
              (Shared(export_arguments, "export"), [parser, out]), (Shared(import_arguments, "import"), [parser, back]),
              *((Shared(define, f"answers {action}"), [parser, answers, subs[action]])
                for action, (_, define) in ANSWERS.items() if define)]
    for options, parsers in shared:
        options.add_to(*parsers)
    parser.epilog = "Anything else is a Hydra override naming the data (and classifier): dataset=table dataset.path=..."
    args, rest = parser.parse_known_args(argv)
    command = f"answers {args.action}" if args.command == "answers" else args.command
    completed(parser, args, command, *(options for options, _ in shared))
    if getattr(args, "n", 1) < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    file_out(parser, args, {"export": "relations_sheet.csv", "import": "labels.csv"}.get(command, "answers_sheet.csv"))
    if args.command == "answers":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if not 0 < getattr(args, "width", 0.5) < 1:
            parser.error(f"--width must be in (0, 1), got {args.width}")
        return args
    unknown = [a for a in rest if "=" not in a or a.startswith("-")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
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
    if args.command == "export":  # the data only: no model is loaded
        run_command(lambda: label.export(config, args.n, args.out, args.seed))
    else:
        from flows.run.preflight import check_models, classifier_models

        def work() -> None:
            # the classifier's models are here (one line otherwise), before the data loads
            check_models(config, classifier_models(config))
            label.import_sheet(config, args.sheet, args.out or args.sheet.with_suffix(".labels.csv"))

        run_command(work)


if __name__ == "__main__":
    main()
