"""The datasets bundled in opi/datasets/ (deeplogic-130, deeplogic-v2) meet their datasheets: counts, article sizes,
evidence that is verbatim and spread over chunks, labels a second pass agrees with, and no shortcut from the
questions alone. The figures are recomputed here from the files with the library (the datasheet's recipe is
benchmarks/dataset_card.py)."""
import importlib.util
import re
from collections import Counter

import numpy as np
import pytest

from opi.articles import prepare_articles
from opi.chunking import document_id
from opi.data import bundled_path, load_examples, read_table
from opi.relations import load_relation_set
from opi.schemas import ChunkingConfig, DatasetConfig
from tests.helpers.paths import ROOT

PAPER = ChunkingConfig()  # the paper's chunking: 100 words, 20 overlapping
K = 4


def evidence_spread(evidence, chunks) -> bool:
    """No single chunk holds every evidence piece: one chunk cannot answer the question."""
    return not any(all(piece in chunk.text for piece in evidence) for chunk in chunks)


def test_deeplogic_130_shape():
    labels = load_relation_set("paper13").labels
    examples, report = load_examples(DatasetConfig(name="deeplogic-130"), label_set=labels)
    assert report.rows_kept == 130
    assert len({e.context for e in examples}) >= 26
    assert Counter(e.relation for e in examples) == {label: 10 for label in labels}
    for e in examples:
        assert e.question.strip().endswith("?")
        assert 400 <= len(e.context.split()) <= 900
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", e.answer.strip()) if s]
        assert 1 <= len(sentences) <= 3 and e.answer[0].isupper() and e.answer.strip()[-1] in ".!?", e.id
        assert e.evidence and all(sentence in e.context for sentence in e.evidence), e.id


def test_deeplogic_130_multi_hop_answers_need_more_than_one_chunk():
    examples, _ = load_examples(DatasetConfig(name="deeplogic-130", relations=["multi_hop"]))
    articles = prepare_articles([e.context for e in examples], PAPER.size, PAPER.overlap)
    spread = [evidence_spread(e.evidence, articles[document_id(e.context)].chunks) for e in examples]
    assert sum(spread) / len(spread) >= 0.8  # DATASHEET.md records 10 of 10


def test_random_all_evidence_by_hand():
    # 4 chunks, draws of 2 (6 of them); evidence in chunk 0, and in chunk 1 or 2: {0,1}, {0,2} hold both -> 2/6
    assert random_all_evidence([{0}, {1, 2}], 4, k=2) == pytest.approx(2 / 6)


def benchmark(name: str):
    """A script of benchmarks/: the datasheet's figures are computed by benchmarks/dataset_card.py."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CARD = benchmark("dataset_card")
random_all_evidence, question_only_baseline, shared_names = (CARD.random_all_evidence, CARD.question_only_baseline,
                                                             CARD.shared_names)


@pytest.fixture(scope="module")
def v2():
    """deeplogic-v2's files, its articles prepared at the paper's chunking, by article id."""
    folder = bundled_path("deeplogic-v2")
    articles, examples = read_table(folder / "articles.jsonl"), read_table(folder / "examples.jsonl")
    prepared = prepare_articles([a["context"] for a in articles], PAPER.size, PAPER.overlap)
    return folder, articles, examples, {a["article_id"]: prepared[document_id(a["context"])] for a in articles}


def test_deeplogic_v2_counts_and_article_sizes(v2):
    _, articles, examples, prepared = v2
    assert len(articles) >= 52 and len(examples) >= 390
    per_relation = Counter(e["relation"] for e in examples)
    assert len(per_relation) == 13 and min(per_relation.values()) >= 30
    words = [len(a["context"].split()) for a in articles]
    assert min(words) >= 1200 and max(words) <= 2000
    chunks = [len(p.chunks) for p in prepared.values()]
    assert min(chunks) >= 15
    assert np.mean([min(K, n) / n for n in chunks]) <= 0.25  # k=4 sees at most a quarter of an article


def test_deeplogic_v2_evidence_is_rarely_found_by_four_random_chunks(v2):
    _, _, examples, prepared = v2
    rates = []
    for example in examples:
        article = prepared[example["article_id"]]
        sentence_of = {s.text: s.idx for s in article.sentences}
        chunks_of = [{c.idx for c in article.chunks if sentence_of[piece] in c.sentence_ids}
                     for piece in example["evidence"]]
        rates.append(random_all_evidence(chunks_of, len(article.chunks)))
    assert np.mean(rates) <= 0.05


def test_deeplogic_v2_questions_alone_do_not_give_the_relation_away(v2):
    _, _, examples, _ = v2
    assert question_only_baseline(examples) <= 0.45


def test_deeplogic_v2_second_labelling_passes_agree_with_the_first(v2):
    from sklearn.metrics import cohen_kappa_score

    folder, _, examples, _ = v2
    second = read_table(folder / "second_pass.jsonl")
    resolutions = {r["id"]: r for r in read_table(folder / "resolutions.jsonl")}
    first = {e["id"]: resolutions.get(e["id"], {}).get("first_pass", e["relation"]) for e in examples}
    passes = sorted({r["pass"] for r in second})
    assert len(passes) == 2
    for name in passes:
        rows = [r for r in second if r["pass"] == name]
        assert cohen_kappa_score([first[r["id"]] for r in rows], [r["relation"] for r in rows]) >= 0.7, name


def test_deeplogic_v2_reuses_no_invented_name_across_articles(v2):
    _, articles, _, _ = v2
    person_or_org = set(shared_names(articles)) - {"Laguna", "Punta", "Puerto", "Editions", "Republic", "Lady",
                                              "Professor"}
    assert not person_or_org, person_or_org


def test_deeplogic_v2_evidence_is_whole_sentences_and_answers_are_sentences(v2):
    examples, _ = load_examples(DatasetConfig(), label_set=load_relation_set().labels)
    _, _, _, prepared = v2
    by_context = {a.doc_id: a for a in prepared.values()}
    for e in examples:
        sentences = {s.text for s in by_context[document_id(e.context)].sentences}
        assert e.evidence and set(e.evidence) <= sentences, e.id  # whole sentences as the splitter cuts them
        assert e.question.strip().endswith("?") and e.answer.strip()[-1] in ".!?", e.id
