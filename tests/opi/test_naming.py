import pytest

from opi.naming import Described, bracketed, leaf_labels, matched, short_names


def described(retrieval: str, reader: str = "extractive", classifier: str | None = "local-clf",
              **settings: str) -> Described:
    return Described(retrieval, reader, classifier, {key.replace("__", "."): value for key, value in settings.items()})


def test_a_grid_is_named_by_its_retrievals_and_the_shared_parts_are_said_once():
    names, fixed = short_names([described("kNN"), described("A-Four"), described("BM25")])
    assert names == ["kNN", "A-Four", "BM25"]
    assert fixed == {"reader": "extractive", "classifier": "local-clf"}


def test_reader_and_classifier_appear_only_where_they_vary():
    names, fixed = short_names([described("kNN"), described("kNN", "gpt-4o"), described("BM25", "gpt-4o")])
    assert names == ["kNN · extractive", "kNN · gpt-4o", "BM25 · gpt-4o"] and fixed == {"classifier": "local-clf"}
    names, fixed = short_names([described("kNN", classifier=None), described("BM25", classifier=None)])
    assert names == ["kNN", "BM25"] and fixed == {"reader": "extractive"}  # no gold relations: no classifier


def test_settings_tell_apart_configurations_of_the_same_parts_only():
    names, _ = short_names([described("kNN", retriever__k="2", retriever___target_="a.KNN"),
                            described("kNN", retriever__k="4", retriever___target_="a.KNN"),
                            described("BM25", retriever__k="8", retriever___target_="a.BM25")])
    assert names == ["kNN k=2", "kNN k=4", "BM25"]


def test_clashing_leaves_are_said_by_the_shortest_suffix_that_tells_them_apart():
    assert leaf_labels(["embedding.model", "metrics.similarity.model", "retriever.k"]) == {
        "embedding.model": "embedding.model", "metrics.similarity.model": "similarity.model", "retriever.k": "k"}
    assert leaf_labels(["dataset.name"]) == {"dataset.name": "dataset"}
    names, _ = short_names([described("A-Two", retrievers__knn__k="2", retrievers__dps__k="4"),
                            described("A-Two", retrievers__knn__k="4", retrievers__dps__k="4"),
                            described("A-Two", retrievers__knn__k="4", retrievers__dps__k="2")])
    assert names == ["A-Two knn.k=2 dps.k=4", "A-Two knn.k=4 dps.k=4", "A-Two knn.k=4 dps.k=2"]


def test_names_are_unique_and_hold_no_pipe():
    names, fixed = short_names([described("kNN"), described("kNN"), described("kNN"), described("a|b", "r|s")])
    assert names == ["kNN · extractive", "kNN · extractive (2)", "kNN · extractive (3)", "a/b · r/s"]
    assert fixed == {"classifier": "local-clf"}
    assert short_names([described("x (2)"), described("x"), described("x")])[0] == ["x (2)", "x", "x (3)"]
    assert short_names([]) == ([], {})


def test_long_and_path_values_are_shortened():
    names, _ = short_names([described("kNN", dataset__path="/data/sets/mine.csv"),
                            described("kNN", dataset__path="/data/sets/" + "x" * 40 + ".csv")])
    assert names == ["kNN path=mine.csv", "kNN path=" + "x" * 31 + "…"]


@pytest.fixture(scope="module")
def params():
    """Real child runs' params: the composed configuration's effective settings, flattened as MLflow logs them."""
    from flows.run.config import compose_config, typed
    from flows.run.identity import describe, effective_settings
    from flows.tracking.runs import flatten

    def run(*overrides: str) -> Described:
        config = typed(compose_config(list(overrides)), list(overrides))
        retrieval, reader, *classifier = describe(config).name.split(" | ")
        return Described(retrieval, reader, classifier[0] if classifier else None,
                         {k: str(v) for k, v in flatten(effective_settings(config)).items()})

    return run


def test_real_params_name_a_grid_and_a_k_sweep(params):
    grid = [params(f"setup={s}") for s in ("knn", "bm25", "a_four", "s_two", "random", "oracle")]
    names, fixed = short_names(grid)
    assert names == ["kNN", "BM25", "A-Four", "S-Two", "Random", "Oracle"]
    assert fixed == {"reader": "extractive", "classifier": "local-clf", "data": "deeplogic-v2"}
    swept = [params("setup=knn", f"retriever.k={k}") for k in (2, 4)] + [params("setup=bm25", "retriever.k=2")]
    assert short_names(swept)[0] == ["kNN k=2", "kNN k=4", "BM25"]
    chunked = [params("setup=knn", f"chunking.size={size}") for size in (50, 100)]
    assert short_names(chunked)[0] == ["kNN size=50", "kNN size=100"]


def test_a_stable_name_splits_into_its_description_and_the_settings_in_its_brackets():
    assert bracketed("kNN | extractive | local-clf") == ("kNN | extractive | local-clf", {})
    assert bracketed("kNN | extractive [retriever.k=4]") == ("kNN | extractive", {"retriever.k": "4"})
    assert bracketed("kNN [a.b=[1, 2], retriever.k=4]") == ("kNN", {"a.b": "[1, 2]", "retriever.k": "4"})
    assert bracketed("kNN [run 1a2b3c4d]") == ("kNN [run 1a2b3c4d]", {})  # the same configuration twice


def test_configurations_named_apart_by_what_else_their_sweep_holds_are_matched_by_their_settings():
    ours = {"kNN [retriever.k=4]": {"retriever.k": "4"}, "kNN [retriever.k=8]": {"retriever.k": "8"}, "BM25": {}}
    assert matched(ours, {"kNN": {"retriever.k": "4"}, "BM25": {}}) == {"kNN": "kNN [retriever.k=4]", "BM25": "BM25"}
    assert matched({"kNN": {"retriever.k": "2"}}, {"kNN [retriever.k=2]": {"retriever.k": "2"},
                                                   "kNN [retriever.k=8]": {"retriever.k": "8"}}) == {
        "kNN [retriever.k=2]": "kNN"}
    # a baseline file knows only the settings in its names: one plain kNN cannot tell k=4 from k=8
    assert matched(ours, {"kNN": {}, "BM25": {}}) == {"BM25": "BM25"}
    # one kNN each side, its k changed tonight: the same name, so judged (a changed setting is what the gate is for)
    assert matched({"kNN": {"retriever.k": "1"}}, {"kNN": {"retriever.k": "4"}}) == {"kNN": "kNN"}
    assert matched({"kNN [retriever.k=4]": {"retriever.k": "4"}}, {"BM25": {}}) == {}  # another kind
