"""A configuration's data: read once per process, and the classifier's training data built and hashed once."""
import pytest

from flows.orchestration import hashing
from flows.run import data as run_data
from opi.data import Example


def examples(*answers):
    return [Example(f"e{i}", "An article.", "A question?", answer, "direct_matching") for i, answer in enumerate(answers)]


def test_training_data_is_hashed_once_per_dataset(monkeypatch):
    calls = []
    real_hashed = hashing.hashed
    monkeypatch.setattr(run_data, "hashed", lambda value, known=None: calls.append(len(value)) or real_hashed(value,
                                                                                                             known))
    pool = examples("yes", "no", "maybe")
    data = run_data.Data(None, real_hashed(pool[:2]), pool, None, [], "all")  # filtered: 2 of the pool's 3
    first, again = data.pool_training, data.pool_training
    assert again is first and calls == [3]  # asked for twice (as every job does), built and hashed once
    assert list(first.ids) == ["e0", "e1", "e2"] and list(first.labels) == ["direct_matching"] * 3 and first.cross_fit
    assert first.triples.content_hash == real_hashed(list(first.triples)).content_hash
    other = run_data.Data(None, real_hashed(pool[:2]), examples("yes", "no", "maybe"), None, [], "all").pool_training
    assert other is not first and other.triples.content_hash == first.triples.content_hash and calls == [3, 3]

    # unfiltered, the pool is the examples: the triples' hash comes from theirs, and follows their content
    whole = run_data.Data(None, real_hashed(pool), pool, None, [], "all").pool_training
    changed = examples("yes", "no", "perhaps")
    assert whole.triples.content_hash == "triples-of-" + real_hashed(pool).content_hash
    assert run_data.Data(None, real_hashed(changed), changed, None, [], "all").pool_training.triples.content_hash \
        != whole.triples.content_hash


def test_a_race_s_parts_of_the_data_are_read_from_one_read_of_the_dataset(monkeypatch):
    # a race asks for each round's part and each tracked run's rounds 1..r: one read and check of the file for all
    from flows.run.config import compose_config, typed

    reads = []
    real = run_data.load_examples
    monkeypatch.setattr(run_data, "load_examples", lambda *args, **kwargs: reads.append(1) or real(*args, **kwargs))
    run_data._load_data.cache_clear()
    run_data._whole_data.cache_clear()

    def part(first: int | None, last: int | None = None):
        rounds = [] if first is None else ["dataset.rounds=4", f"dataset.rounds_from={first}",
                                           f"dataset.rounds_to={last or first}"]
        return run_data.load_data(typed(compose_config(rounds))).examples

    whole, parts, first_two = part(None), [part(r) for r in range(1, 5)], part(1, 2)
    assert len(reads) == 1
    assert sorted(e.id for p in parts for e in p) == sorted(e.id for e in whole) and all(parts)
    assert [e.id for e in first_two] == [e.id for e in whole if e in {*parts[0], *parts[1]}]


def test_a_bad_row_of_the_classifiers_training_file_is_not_offered_the_evaluated_datas_skip(tmp_path):
    from flows.run.data import file_training
    from opi.data import DataError

    path = tmp_path / "train.csv"
    path.write_text("context,question,answer,relation\nThe mill opened in 1850.,When?,1850,deductive\n"
                    "The mill closed.,Why?,,fuzzy\n")
    with pytest.raises(DataError) as raised:
        file_training(str(path), "paper13")
    assert str(raised.value).endswith("field 'answer': empty or not text ('') (classifier.train_path: fix the row)")
    assert "on_invalid" not in str(raised.value)


def test_a_load_note_is_a_line_of_the_run_s_log(tmp_path, caplog):
    import json

    from flows.run.config import compose_config, typed

    row = {"id": "a", "context": "The mill opened in 1850. It closed in 1901.", "question": "When did it open?",
           "answer": "In 1850.", "relation": "deductive"}
    (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(row | {"id": "b"}) + "\n")
    (tmp_path / "l.csv").write_text("id,relation\na,deductive\nb,fuzzy\n")
    run_data._load_data.cache_clear()
    run_data._whole_data.cache_clear()
    with caplog.at_level("WARNING", logger=run_data.log.name):
        data = run_data.load_data(typed(compose_config([
            "dataset=table", f"dataset.path={tmp_path / 'd.jsonl'}", f"dataset.labels_path={tmp_path / 'l.csv'}"])))
    assert [e.relation for e in data.examples] == ["deductive", "fuzzy"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path / 'd.jsonl'} has a 'relation' column of its own (2 labelled rows, 1 of them differently); the "
        f"labels of {tmp_path / 'l.csv'} replace it"]
