"""Options a command accepts wherever its user puts them: before its subcommand and after it.

argparse reads an option only at the level that defines it, and a subcommand's default would overwrite a value given
before the subcommand. So an option is defined on every level it may be given at with the default ``SUPPRESS`` (an
option not given leaves no value, at any level), and the default of the subcommand that runs is filled in after
parsing:

    store = Shared(add_store_arguments, "export", "import")   # options and the subcommands they apply to
    store.add_to(parser, export, back)                         # before and after the subcommand
    args = parser.parse_args(argv)
    completed(parser, args, args.command, store)

Two subcommands may each have an option of the same name with defaults of their own (``--out``): before the
subcommand it is one option, whose default is the subcommand's. An option given for a subcommand it does not apply
to is refused as argparse refuses (``--sweep is an option of answers export, answers import and answers plan
only, not of export``).
"""
from __future__ import annotations

import argparse
from typing import Any, Callable


class _Suppressing:
    """A parser whose ``add_argument`` records each option's default and defines it with ``SUPPRESS``; an option
    the parser already has (another subcommand's of the same name, before the subcommand) is not defined twice."""

    def __init__(self, parser: argparse.ArgumentParser, shared: "Shared"):
        self.parser, self.shared = parser, shared

    def add_argument(self, *names: str, **options: Any) -> argparse.Action | None:
        default = options.get("default", False if options.get("action") == "store_true" else None)
        dest = options.get("dest") or next((n for n in names if n.startswith("--")), names[0]).lstrip("-")
        dest = dest.replace("-", "_")
        self.shared.defaults[dest] = default
        self.shared.flags[dest] = names[0]
        try:
            return self.parser.add_argument(*names, **{**options, "default": argparse.SUPPRESS})
        except argparse.ArgumentError:  # another subcommand's option of that name: defined once
            return None


class Shared:
    """Options ``define(parser)`` adds (with their defaults, as on one parser), for every parser of a command that
    should accept them; ``commands``: the subcommands they apply to (none given: every one)."""

    def __init__(self, define: Callable[[Any], None], *commands: str):
        self.define = define
        self.commands = set(commands)
        self.defaults: dict[str, Any] = {}
        self.flags: dict[str, str] = {}

    def add_to(self, *parsers: argparse.ArgumentParser) -> None:
        for parser in parsers:
            self.define(_Suppressing(parser, self))

    def applies(self, command: str | None) -> bool:
        return not self.commands or command in self.commands


def completed(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str | None,
              *shared: Shared) -> argparse.Namespace:
    """``args`` with the default of every option of ``shared`` not given, as the subcommand ``command`` that runs
    sets it; an option given for a subcommand it does not apply to ends the command as argparse does (usage, one
    line, exit 2)."""
    applying = [options for options in shared if options.applies(command)]
    for options in shared:
        for dest, flag in options.flags.items():
            if hasattr(args, dest) and not any(dest in other.defaults for other in applying):
                where = sorted({c for other in shared if dest in other.defaults for c in other.commands})
                listing = ", ".join(where[:-1]) + (" and " if len(where) > 1 else "") + where[-1]
                parser.error(f"{flag} is an option of {listing} only, not of {command}")
    for options in applying:
        for dest, default in options.defaults.items():
            if not hasattr(args, dest):
                setattr(args, dest, default)
    return args


def file_out(parser: argparse.ArgumentParser, args: argparse.Namespace, example: str) -> None:
    """An ``--out`` that names a folder ends the command as argparse does (one line, exit 2), with a file to give."""
    out = getattr(args, "out", None)
    if out is not None and out.is_dir():
        parser.error(f"--out {out} is a folder: give the file to write, e.g. --out {out / example}")
