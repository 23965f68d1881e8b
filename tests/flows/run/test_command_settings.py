"""Settings a command line gives that used to crash or leave a run open (issue #38, "Sheets and commands"): each is
refused in one line naming the setting, at compose time, before any MLflow run opens; a sweep's every job is
checked before its parent run."""
import dataclasses

import mlflow
import pytest
from omegaconf import OmegaConf

from flows.run.config import KINDS, compose_config, component_class, kind_check, options, typed
from flows.run.preflight import check_models, classifier_models
from flows.base.errors import CommandError, explained
from opi import components
from opi.schemas import MAX_EXPERIMENT_NAME, MAX_TAG_VALUE, TrackingConfig
from tests.helpers.cli import run_cli

LEAD = "tests.helpers.components.LeadRetriever"


def typed_from(*overrides, choices=None):
    return typed(compose_config(list(overrides)), list(overrides), choices)


def refusal(*overrides, choices=None) -> str:
    with pytest.raises(ValueError) as err:
        typed_from(*overrides, choices=choices)
    assert "\n" not in str(err.value)
    return str(err.value)


# --- names MLflow keeps: the experiment's (at most 500 characters) and the label tag's (at most 8,000) ---

@pytest.mark.parametrize("experiment", ["e" * 1000, "e" * (MAX_EXPERIMENT_NAME - 10), "", "  "])
def test_an_experiment_name_mlflow_cannot_take_is_refused_in_one_line(experiment):
    with pytest.raises(ValueError, match=r"^tracking\.experiment: an MLflow experiment name of 1 to 489 characters"):
        TrackingConfig(experiment=experiment)


def test_the_longest_experiment_name_and_label_are_taken_by_mlflow(tmp_path):
    tracking = TrackingConfig(experiment="e" * 489, label="l" * MAX_TAG_VALUE)
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    for name in (tracking.experiment, tracking.experiment + "-classifier"):  # opi-eval's and opi-train-classifier's
        experiment = client.create_experiment(name)
        run = client.create_run(experiment, tags={"opi.label": tracking.label})
        client.set_tag(run.info.run_id, "opi.label", tracking.label)
        assert client.get_run(run.info.run_id).data.tags["opi.label"] == tracking.label  # not cut


def test_a_label_mlflow_would_cut_is_refused():
    with pytest.raises(ValueError, match=r"^tracking\.label: 1 to 8000 characters"):
        TrackingConfig(label="l" * (MAX_TAG_VALUE + 1))
    with pytest.raises(ValueError, match=r"^tracking\.label"):
        TrackingConfig(label="")


# --- components: a class to name, importable, of the right kind ---

@pytest.mark.parametrize("overrides, message", [
    (["retriever=custom"], "retriever=custom needs retriever._target_: the import path of your class, e.g. "
                           "retriever._target_=my_pkg.MyRetriever (subclass opi.retrievers.Retriever"),
    (["rerank=custom"], "rerank=custom needs rerank._target_: the import path of your class, e.g. "
                        "rerank._target_=my_pkg.MyReranker"),
    (["classifier=custom"], "classifier=custom needs classifier._target_: the import path of your class"),
    (["llm=custom"], "llm=custom needs llm.reader._target_: the import path of your class, e.g. "
                     "llm.reader._target_=my_pkg.MyReader"),
    (["setup=a_two", "+retriever@retrievers.mine=custom"], "retrievers.mine needs retrievers.mine._target_"),
    (["retriever=custom", "retriever._target_=nope.Nope"],
     "retriever: cannot import 'nope.Nope' (_target_): no module named 'nope'"),
    (["retriever=custom", "retriever._target_=opi.combine.Nope"],
     "retriever: cannot import 'opi.combine.Nope' (_target_): opi.combine has no 'Nope'"),
    (["retriever=custom", "retriever._target_=Nope"], "retriever: cannot import 'Nope' (_target_): give the import "
                                                      "path of a class"),
    (["retriever=custom", "retriever._target_=opi.combine.Single"],
     "retriever._target_=opi.combine.Single is not a retriever (it has no prepare() and no rank_examples()): "
     "subclass opi.retrievers.Retriever"),
    (["rerank=custom", f"rerank._target_={LEAD}"], f"rerank._target_={LEAD} is not a reranker (it has no scores() "
                                                   "or score_many())"),
    (["classifier=custom", "classifier._target_=opi.combine"], "classifier._target_=opi.combine is not a relation "
                                                               "classifier (it has no predict())"),
    (["llm=custom", f"llm.reader._target_={LEAD}"], f"llm.reader._target_={LEAD} is not a reader (it has no "
                                                    "answer())"),
    (["classifier=custom", "classifier._target_=opi.classify.CrossFitted"],  # has predict(), declares nothing
     "classifier._target_=opi.classify.CrossFitted is not a subclass of opi.classify.RelationClassifier, which says "
     "what the run asks of it: subclass opi.classify.RelationClassifier and implement predict(triples, "
     "progress=None)"),
    (["llm=custom", "llm.reader._target_=tests.helpers.components.PlainReader"],  # answer() alone declares nothing
     "llm.reader._target_=tests.helpers.components.PlainReader is not a subclass of opi.llm.reader.Reader, which says "
     "what the run asks of it: subclass opi.llm.reader.Reader and implement answer("),
    (["setup=a_two", "combination._target_=tests.helpers.components.PlainReader"],
     "combination._target_=tests.helpers.components.PlainReader is not a combination (it has no combine() and no "
     "ranking()): subclass opi.combine.Combination"),
])
def test_a_component_without_a_usable_class_is_one_line_naming_the_setting(overrides, message):
    assert refusal(*overrides).startswith(message)


def test_the_option_a_job_chose_is_named():
    assert refusal("retriever=custom", choices={"retriever": "mine"}).startswith("retriever=mine needs")


def test_every_built_in_option_is_of_its_groups_kind():
    for group in ("retriever", "combination", "rerank", "classifier", "llm"):
        for option in options(group):
            cls = component_class(group, option)
            if cls is not None:  # custom: the user's
                assert kind_check("llm.reader" if group == "llm" else group)(cls) is None, (group, option)
    assert set(KINDS) == {"retriever", "combination", "rerank", "classifier", "llm.reader"}


def test_a_custom_component_of_the_right_kind_is_built():
    assert typed_from("retriever=custom", f"retriever._target_={LEAD}").retriever.name == "Lead"


def test_an_import_error_inside_a_users_module_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "broken_pkg.py").write_text("import not_installed_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"^cannot import 'broken_pkg\.Mine' \(_target_\): importing broken_pkg "
                                         r"failed: No module named 'not_installed_dependency'$"):
        components.imported("broken_pkg.Mine")


# --- combination.<setting>: changes nothing where the combination has no such setting ---

@pytest.mark.parametrize("overrides, message", [
    (["++combination.k=3"], "'combination.k=3' changes nothing in kNN, a single retriever (no combination): its "
                            "settings are retriever.* (retriever.k=...)"),
    (["setup=s_two", "++combination.k=3"], "'combination.k=3' changes nothing in S-Two, which has no setting 'k' "
                                           "(each member keeps its own top k: set retrievers.<member>.k)"),
    (["setup=a_two", "++combination.kk=3"], "'combination.kk=3' changes nothing in A-Two, which has no setting 'kk'"),
])
def test_a_combination_setting_that_changes_nothing_is_refused(overrides, message):
    assert refusal(*overrides) == message


def test_the_setup_a_combination_setting_changes_nothing_in_is_named():
    assert refusal("setup=s_two", "++combination.k=3", choices={"setup": "s_two"}).startswith(
        "'combination.k=3' changes nothing in S-Two (setup=s_two), which has no setting 'k'")


def test_a_combination_setting_applies_where_the_combination_has_it():
    assert typed_from("setup=a_seven", "++combination.k=null").combination.k is None
    assert typed_from("setup=a_four", "combination.k=null").combination.k is None


def test_for_every_combination_lets_the_base_of_a_sweep_compose():
    from flows.cli.evaluate import for_every_combination

    assert for_every_combination(["-m", "setup=a_seven,a_four", "combination.k=null"]) == [
        "-m", "setup=a_seven,a_four", "++combination.k=null"]
    assert for_every_combination(["experiment=paper_grid", "combination.k=8"]) == [
        "experiment=paper_grid", "++combination.k=8"]
    for unchanged in (["-m", "setup=a_four", "combination.k=null"],  # the command line's own combination has it
                      ["-m", "setup=a_two,a_four", "combination.k=2,4"],  # swept: each job composes its own
                      ["-m", "combination=a_two,s_two", "combination.members=[knn,lead]"],  # single has members
                      ["setup=a_two", "+combination.c=3"]):
        assert for_every_combination(unchanged) == unchanged


# --- the models opi-train-classifier and opi-label import load ---

def test_the_classifier_models_are_checked_with_the_setting_that_names_them():
    assert classifier_models(typed_from()) == {"embedding.model": "packaged:all-MiniLM-L6-v2"}
    config = typed_from("classifier.embedding.model=/models/c")
    assert classifier_models(config) == {"classifier.embedding.model": "/models/c"}
    with pytest.raises(CommandError, match=r"^model problem: classifier\.embedding\.model=/models/c: no such folder"):
        check_models(config, classifier_models(config))


def test_a_model_that_cannot_load_is_a_model_problem_not_a_traceback(monkeypatch):
    import sentence_transformers

    from opi.embeddings.local import SentenceEmbedder

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", offline)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online: preflight leaves a hub name to the download
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with pytest.raises(Exception) as err:
        SentenceEmbedder("someone/not-downloaded").compute(["a text"])
    assert explained(err.value).startswith("model problem: the embedding model 'someone/not-downloaded' cannot be "
                                           "loaded (We couldn't connect to 'https://huggingface.co' to load the "
                                           "files.): connect to the network once")


def test_opi_label_asks_the_classifier_with_its_own_embedding(monkeypatch):
    from flows.human import label
    from flows.orchestration import tasks
    from flows.orchestration.results import Classified

    seen = {}

    def classify(classifier, llm, training, ids, triples, context, registered):
        seen["embedding"] = context.embedding
        return Classified(["direct_matching"] * len(ids))

    monkeypatch.setattr(tasks, "classify", dataclasses.replace(tasks.classify, fn=classify))
    config = typed_from("dataset=deeplogic-130", "classifier.embedding.batch_size=7")
    examples = label.load_data(config).examples[:2]
    label.silver_labels(config, examples, ["direct_matching", "summarization"])
    assert seen["embedding"].batch_size == 7 and seen["embedding"].model == config.embedding.model


# --- end to end: one line, exit 2, and no MLflow run opened ---

def runs_in(folder):
    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    return [run for experiment in client.search_experiments() for run in client.search_runs([experiment.experiment_id])]


@pytest.mark.parametrize("overrides, last", [
    (["-m", "setup=knn,a_two", "combination.k=null"],
     "invalid configuration: 'combination.k=null' changes nothing in kNN (setup=knn), a single retriever (no "
     "combination): its settings are retriever.* (retriever.k=...)"),
    pytest.param(["-m", "setup=a_two,s_two", "combination.k=2,4"],
                 "invalid configuration: 'combination.k=2' changes nothing in S-Two (setup=s_two), which has no "
                 "setting 'k' (each member keeps its own top k: set retrievers.<member>.k)", marks=pytest.mark.slow),
    pytest.param(["-m", "retriever=knn,custom"],
                 "invalid configuration: retriever=custom needs retriever._target_: the import path of your class, "
                 "e.g. retriever._target_=my_pkg.MyRetriever (subclass opi.retrievers.Retriever and implement score() "
                 "or rank())", marks=pytest.mark.slow),
])
def test_a_sweep_with_a_job_that_is_refused_opens_no_parent_run(tmp_path, overrides, last):
    output = run_cli("flows.cli.evaluate", tmp_path, *overrides, "dataset.limit=2", expect=2)
    assert output.strip().splitlines()[-1].endswith(last)
    assert "Traceback" not in output and "parent run" not in output
    assert not (tmp_path / "mlflow.db").exists() or not runs_in(tmp_path)


@pytest.mark.slow
def test_a_plus_prefixed_combination_setting_leaves_no_killed_parent_run(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "-m", "setup=a_seven,a_two", "+combination.k=null",
                     "dataset.limit=2", expect=2)
    assert "cannot compose the configuration setup=a_seven +combination.k=null" in output.strip().splitlines()[-1]
    assert "Could not append to config. An item is already at 'combination.k'." in output.strip().splitlines()[-1]
    assert not (tmp_path / "mlflow.db").exists() or not runs_in(tmp_path)


@pytest.mark.slow
def test_combination_k_on_the_command_line_applies_to_every_swept_combination(tmp_path):
    run_cli("flows.cli.evaluate", tmp_path, "-m", "setup=a_two,a_four", "combination.k=null", "dataset.limit=2",
            "report.enabled=false", "tracking.traces=none")
    children = [run for run in runs_in(tmp_path) if run.data.tags.get("opi.role") != "sweep"]
    assert sorted(run.data.tags["opi.setup"] for run in children) == ["A-Four", "A-Two"]
    assert {run.data.params["combination.k"] for run in children} == {"None"}


def test_a_thousand_character_experiment_name_is_one_line_before_mlflow(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, f"tracking.experiment={'e' * 1000}", expect=2)
    assert output.strip().splitlines()[-1].endswith(
        "invalid configuration: tracking.experiment: an MLflow experiment name of 1 to 489 characters (MLflow takes "
        "500; opi-train-classifier adds '-classifier'), got 1000 characters")
    assert "Traceback" not in output and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("module, arguments", [
    pytest.param("flows.cli.train_classifier", ["classifier.embedding.model=/models/c", "train.per_relation=2"],
                 marks=pytest.mark.slow),
    ("flows.cli.label", ["import", "sheet.csv", "dataset=deeplogic-130", "classifier.embedding.model=/models/c"]),
])
def test_train_classifier_and_label_import_check_their_models_first(tmp_path, module, arguments):
    output = run_cli(module, tmp_path, *arguments, expect=2)
    assert output.strip().splitlines()[-1].endswith("model problem: classifier.embedding.model=/models/c: no such "
                                                    "folder: give the folder holding the model's files (or a Hugging "
                                                    "Face hub name)")
    assert "Traceback" not in output
