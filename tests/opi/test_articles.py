"""opi.articles: each distinct article segmented and chunked once; the corpus view merging them into one index."""
import pytest

from opi.articles import corpus_view, prepare_articles
from opi.chunking import document_id

MILL = "The mill opened in 1850. It closed in 1901. The river silted up."
QUAY = "Ships docked at the quay. Sailors sang at night."


def test_each_distinct_article_is_prepared_once_under_its_content_id():
    articles = prepare_articles([MILL, QUAY, MILL], size=6, overlap=0)
    assert list(articles) == [document_id(MILL), document_id(QUAY)]
    mill = articles[document_id(MILL)]
    assert mill.doc_id == document_id(MILL)
    assert [s.text for s in mill.sentences] == ["The mill opened in 1850.", "It closed in 1901.",
                                                "The river silted up."]
    # 5 + 4 + 4 words, at most 6 a chunk: one chunk per sentence
    assert [(c.idx, c.text, c.sentence_ids) for c in mill.chunks] == [
        (0, "The mill opened in 1850.", (0,)), (1, "It closed in 1901.", (1,)), (2, "The river silted up.", (2,))]


def test_the_chunk_size_and_overlap_are_the_callers():
    (mill,) = prepare_articles([MILL], size=8, overlap=3).values()
    assert [(c.text, c.sentence_ids) for c in mill.chunks] == [
        ("The mill opened in 1850.", (0,)), ("It closed in 1901. The river silted up.", (1, 2))]
    with pytest.raises(TypeError):
        prepare_articles([MILL])  # no default size: ChunkingConfig is the one place it is set
    with pytest.raises(ValueError, match="overlap < size"):
        prepare_articles([MILL], size=5, overlap=5)


def test_the_corpus_view_renumbers_chunks_and_sentences_and_keeps_each_chunks_article():
    articles = prepare_articles([MILL, QUAY], size=6, overlap=0)
    view = corpus_view(articles)
    corpus = view[document_id(MILL)]
    assert view[document_id(QUAY)] is corpus  # every article id maps to the one merged index
    assert corpus.doc_id.startswith("corpus-")
    assert [c.idx for c in corpus.chunks] == [0, 1, 2, 3, 4]
    assert [c.sentence_ids for c in corpus.chunks] == [(0,), (1,), (2,), (3,), (4,)]  # QUAY's offset by MILL's 3
    assert [c.doc_id for c in corpus.chunks] == [document_id(MILL)] * 3 + [document_id(QUAY)] * 2
    assert [s.idx for s in corpus.sentences] == [0, 1, 2, 3, 4]
    assert corpus.sentences[3].text == "Ships docked at the quay." and corpus.sentences[3].start == 0  # own offsets
    for chunk in corpus.chunks:  # each chunk's sentences are still its own text
        assert all(corpus.sentences[i].text in chunk.text for i in chunk.sentence_ids)


def test_the_corpus_id_is_the_same_for_the_same_articles_and_differs_for_others():
    both = prepare_articles([MILL, QUAY], size=6, overlap=0)
    again = corpus_view(prepare_articles([MILL, QUAY], size=6, overlap=0))
    assert next(iter(corpus_view(both).values())).doc_id == next(iter(again.values())).doc_id
    mill_only = corpus_view(prepare_articles([MILL], size=6, overlap=0))
    assert next(iter(mill_only.values())).doc_id != next(iter(again.values())).doc_id



ZH = "".join(f"第{i}天，我们参观了北京的故宫。故宫很大，有很多房间！你去过故宫吗？" for i in range(12))


def test_an_article_without_spaces_is_cut_into_sentences_and_chunks_by_characters():
    (words,) = prepare_articles([ZH], size=100, overlap=20).values()  # the paper's chunking: in words
    assert len(words.chunks) == 1  # the whole article is one "word": one chunk
    (article,) = prepare_articles([ZH], size=100, overlap=20, length="characters", language="zh").values()
    assert len(article.sentences) == 36 and article.sentences[1].text == "故宫很大，有很多房间！"
    assert len(article.chunks) >= 5 and all(len(c.text) <= 100 for c in article.chunks)
    assert all(c.text in ZH for c in article.chunks)  # the chunks are the article's own text


def test_sentences_segmented_once_are_read_back_from_the_store_by_a_later_command(tmp_path, monkeypatch):
    import opi.articles
    from opi.embeddings.store import EmbeddingStore
    from opi.sentences import segmenter_key

    store = EmbeddingStore(tmp_path / "e.sqlite")
    first = prepare_articles([MILL, QUAY], size=6, overlap=0, store=store)
    assert set(store.sentence_spans(segmenter_key("en"), [MILL, QUAY])) == {MILL, QUAY}

    def not_again(*args):
        raise AssertionError("segmented again")

    monkeypatch.setattr(opi.articles, "split_sentences", not_again)
    later = prepare_articles([QUAY, MILL], size=8, overlap=3, store=EmbeddingStore(tmp_path / "e.sqlite"))
    monkeypatch.undo()
    assert later[document_id(MILL)].sentences == first[document_id(MILL)].sentences
    assert later == prepare_articles([QUAY, MILL], size=8, overlap=3)  # chunked as without a store
    # another language's rules are another segmentation: computed, not read
    assert segmenter_key("de") != segmenter_key("en")
    calls = []
    monkeypatch.setattr(opi.articles, "split_sentences", lambda text, language: calls.append(language) or [])
    prepare_articles([MILL], size=6, overlap=0, language="de", store=store)
    assert calls == ["de"]


def test_a_kept_segmentation_that_cannot_be_the_texts_is_segmented_again(tmp_path):
    import numpy as np

    from opi.embeddings.store import EmbeddingStore, text_key
    from opi.sentences import segmenter_key

    store, key = EmbeddingStore(tmp_path / "e.sqlite"), segmenter_key("en")
    store.put_sentence_spans(key, [(MILL, np.array([[0, 24], [25, 999]])),  # past the text's end
                                   (QUAY, np.array([[26, 48], [0, 25]]))])  # out of order
    store.connection().execute("INSERT OR REPLACE INTO sentences VALUES (?, ?, ?)",
                               (key, text_key("x" * 40), b"12345"))
    assert store.sentence_spans(key, [MILL, QUAY, "x" * 40]) == {}
    articles = prepare_articles([MILL, QUAY], size=6, overlap=0, store=store)
    assert articles == prepare_articles([MILL, QUAY], size=6, overlap=0)
    assert set(store.sentence_spans(key, [MILL, QUAY])) == {MILL, QUAY}  # replaced by the right ones
