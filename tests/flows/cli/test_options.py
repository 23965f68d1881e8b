"""Every option of an argparse command is accepted before and after its subcommand (``flows.cli.options``): the
same namespace either way, its default where it is not given, and one applying to other subcommands refused."""
from pathlib import Path

import pytest

from flows.cli import annotate, label, nightly
from flows.cli.start import add_store_arguments
from opi.schemas import TrackingConfig

STORE = {"tracking_uri": TrackingConfig.tracking_uri, "experiment": TrackingConfig.experiment}


def same(parse, *placements):
    parsed = [vars(parse(argv)) for argv in placements]
    assert all(p == parsed[0] for p in parsed), parsed
    return parsed[0]


def test_opi_annotate_takes_the_store_and_sweep_options_on_either_side():
    args = same(annotate.parse_args, ["--sweep", "S", "--experiment", "e", "export", "--out", "x.csv"],
                ["export", "--sweep", "S", "--out", "x.csv", "--experiment", "e"],
                ["--experiment", "e", "export", "--sweep", "S", "--out", "x.csv"])
    assert args["sweep"] == "S" and args["experiment"] == "e" and args["out"] == Path("x.csv")
    defaults = vars(annotate.parse_args(["import", "sheet.csv"]))
    assert defaults["sweep"] is None and {k: defaults[k] for k in STORE} == STORE
    assert defaults["brackets"] == annotate.edges("0.3333,0.6667") and "out" not in defaults
    args = same(annotate.parse_args, ["--n", "3", "--seed", "2", "export"], ["export", "--n", "3", "--seed", "2"])
    assert (args["n"], args["seed"], args["out"]) == (3, 2, Path("annotation_sheet.csv"))
    assert same(annotate.parse_args, ["--brackets", "0.5", "import", "s.csv"],
                ["import", "s.csv", "--brackets", "0.5"])["brackets"] == (0.5,)


def test_opi_label_answers_takes_its_options_at_every_level():
    args = same(label.parse_args, ["answers", "plan", "--sweep", "S", "--seed", "3"],
                ["--sweep", "S", "--seed", "3", "answers", "plan"],
                ["answers", "--sweep", "S", "plan", "--seed", "3"])
    assert (args["sweep"], args["seed"], args["width"]) == ("S", 3, 0.05)
    assert vars(label.parse_args(["answers", "import", "s.csv"]))["seed"] == 0
    args = same(label.parse_args, ["--n", "5", "--out", "o.csv", "answers", "export"],
                ["answers", "--n", "5", "export", "--out", "o.csv"],
                ["answers", "export", "--n", "5", "--out", "o.csv"])
    assert (args["n"], args["out"]) == (5, Path("o.csv"))
    assert same(label.parse_args, ["--width", "0.1", "answers", "plan"], ["answers", "plan", "--width", "0.1"])[
        "width"] == 0.1
    # an option two subcommands share by name keeps each one's own default
    assert (vars(label.parse_args(["export"]))["n"], vars(label.parse_args(["answers", "export"]))["n"]) == (200, 40)
    assert vars(label.parse_args(["import", "s.csv"]))["out"] is None
    assert same(label.parse_args, ["--out", "l.csv", "import", "s.csv"], ["import", "s.csv", "--out", "l.csv"])[
        "out"] == Path("l.csv")
    args = same(label.parse_args, ["--seed", "4", "export", "dataset=table"],
                ["export", "--seed", "4", "dataset=table"])
    assert args["seed"] == 4 and args["n"] == 200 and args["overrides"] == ["dataset=table"]


def test_opi_nightly_takes_each_option_before_or_after_its_subcommand():
    args = same(nightly.parse_args, ["run", "--promote", "--tolerance", "0.2", "llm=gpt-4o"],
                ["--promote", "--tolerance", "0.2", "run", "llm=gpt-4o"])
    assert args["promote"] and args["tolerance"] == 0.2 and args["overrides"] == ["llm=gpt-4o"]
    args = same(nightly.parse_args, ["--experiment", "e", "export-baseline", "--out", "b.json"],
                ["export-baseline", "--out", "b.json", "--experiment", "e"])
    assert args["out"] == Path("b.json") and args["sweep"] is None
    assert vars(nightly.parse_args(["promote", "abc"]))["run_id"] == "abc"


@pytest.mark.parametrize("parse, argv, message", [
    (label.parse_args, ["--sweep", "S", "export"],
     "--sweep is an option of answers export, answers import and answers plan only, not of export"),
    (label.parse_args, ["--seed", "1", "import", "s.csv"],
     "--seed is an option of answers export, answers import, answers plan and export only, not of import"),
    (label.parse_args, ["--width", "0.1", "answers", "export"],
     "--width is an option of answers plan only, not of answers export"),
    (annotate.parse_args, ["--brackets", "0.5", "export"], "--brackets is an option of import only, not of export"),
    (nightly.parse_args, ["--promote", "promote", "abc"],
     "--promote is an option of run and serve only, not of promote"),
    (nightly.parse_args, ["export-baseline"], "the following arguments are required: --out"),
    # a folder where a file is written: was IsADirectoryError's traceback after the sweep's answers were read
    (annotate.parse_args, ["export", "--out", "."], "--out . is a folder: give the file to write, e.g. --out "
                                                    "annotation_sheet.csv"),
    (label.parse_args, ["--out", ".", "answers", "export"], "--out . is a folder: give the file to write, e.g. "
                                                            "--out answers_sheet.csv"),
    (label.parse_args, ["import", "s.csv", "--out", "."], "--out . is a folder: give the file to write, e.g. --out "
                                                          "labels.csv"),
    (nightly.parse_args, ["export-baseline", "--out", "."], "--out . is a folder: give the file to write, e.g. "
                                                            "--out baseline.json"),
])
def test_an_option_where_it_does_not_apply_is_refused_by_argparse(parse, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_the_store_options_keep_their_one_default():
    import argparse

    parser = argparse.ArgumentParser()
    add_store_arguments(parser)
    assert vars(parser.parse_args([])) == STORE
