"""The README is true to what a user sees: its two commands are the ones CI runs, and every ``opi-eval`` command
of its "Sweeping" and "Other data" sections composes, passes every check, and reads its data (files it names are
made here), so a README command cannot silently break again."""
import re
import shlex

import pandas as pd
import pytest

from flows.run.config import compose_config, typed
from flows.run.data import load_data
from tests.helpers.paths import ROOT

README = (ROOT / "README.md").read_text()
# the README's placeholders for a user's own classes -> such classes in an importable module
OWN = {"my_pkg.MyRetriever": "tests.helpers.components.LeadRetriever",
       "my_pkg.MyClassifier": "tests.helpers.components.OneRelationClassifier",
       "my_pkg.MyReader": "tests.helpers.components.FirstSentenceReader"}


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"```bash\n(python3 -m venv[^\n]+)\n```", README)
    assert len(commands) == 2, "README must show exactly the two install-and-run commands"
    assert "opi-eval experiment=paper_grid" in commands[0]
    assert "pytest" in commands[1]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def section(title: str) -> str:
    start = README.index(f"\n{title}\n")
    following = re.search(r"\n#{2,3} ", README[start + len(title) + 2:])
    return README[start:start + len(title) + 2 + (following.start() if following else len(README))]


def commands(text: str) -> list[str]:
    """The ``opi-eval`` command lines of the text's bash blocks (continuation lines joined, comments dropped)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].split(" # ")[0].strip()
            if line.startswith("opi-eval"):
                found.append(line)
    return found


SWEEPING = commands(section("## Sweeping"))
OWN_STACK = commands(section("### Compare your own stack"))
OTHER_DATA = commands(section("### Other data"))
RACING = commands(section("### Racing"))


def overrides(command: str) -> list[str]:
    arguments = [a for a in shlex.split(command)[1:] if a not in ("-m", "--multirun")]
    return [next((a.replace(placeholder, real) for placeholder, real in OWN.items() if placeholder in a), a)
            for a in arguments]


def test_the_sections_have_the_commands_this_test_covers():
    assert len(SWEEPING) >= 15 and len(OTHER_DATA) == 4 and len(OWN_STACK) == 10 and len(RACING) == 4
    assert any("my_pkg.MyRetriever" in c for c in SWEEPING) and any("dataset.columns=" in c for c in OTHER_DATA)


def jobs(command: str) -> list[list[str]]:
    """The command's jobs: itself, or each job of its sweep (``-m``), expanded as the sweeper expands them."""
    if " -m " not in f" {command} ":
        return [overrides(command)]
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from flows.run.config import CONF_DIR, register_configs
    from hydra_plugins.opi_sweeper import expand

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return expand({}, overrides(command), GlobalHydra.instance().config_loader()).jobs


@pytest.mark.parametrize("command", [*SWEEPING, *OWN_STACK, *RACING])
def test_every_sweeping_command_composes_and_checks(command):
    configurations = [typed(compose_config(job), job) for job in jobs(command)]
    assert all(config.metrics.beta > 0 for config in configurations)
    if command in RACING and " -m " in command:  # an experiment's sweep is expanded by the sweeper only
        from flows.run.preflight import race_problem

        assert race_problem(configurations) is None


def write_data(folder) -> None:
    """The files the "Other data" commands name, in the shape each loader reads."""
    rows = [{"context": f"The mill opened in 18{i}0. It closed later.", "question": f"When did mill {i} open?",
             "answer": f"In 18{i}0."} for i in range(3)]
    (folder / "rag12000").mkdir()
    pd.DataFrame(rows).to_parquet(folder / "rag12000" / "test.parquet")
    squad = {"data": [{"title": "Mill", "paragraphs": [{"context": r["context"], "qas": [
        {"id": f"q{i}", "question": r["question"], "answers": [{"text": r["answer"], "answer_start": 0}]}]}
        for i, r in enumerate(rows)]}]}
    (folder / "dev-v2.0.json").write_text(__import__("json").dumps(squad))
    pd.DataFrame({"passage": [r["context"] for r in rows], "query": [r["question"] for r in rows],
                  "gold": [r["answer"] for r in rows]}).to_csv(folder / "my.csv", index=False)
    chinese = [{"context": f"磨坊建于18{i}0年。后来它关闭了。", "question": f"第{i}座磨坊是哪一年建的？",
                "answer": f"In 18{i}0."} for i in range(3)]
    (folder / "zh.jsonl").write_text("\n".join(__import__("json").dumps(r, ensure_ascii=False) for r in chinese))


@pytest.mark.parametrize("command", OTHER_DATA)
def test_every_other_data_command_composes_and_reads_its_data(command, tmp_path, monkeypatch):
    write_data(tmp_path)
    monkeypatch.chdir(tmp_path)  # the README's paths are relative to where the user runs the command
    config = typed(compose_config(overrides(command)), overrides(command))
    data = load_data(config)
    assert len(data.examples) == 3 and data.examples[0].answer.startswith("In 18")
