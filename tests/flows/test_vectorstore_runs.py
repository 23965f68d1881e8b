"""retriever=vectorstore through the command, against a real Chroma server on loopback and a Qdrant folder (local
mode): a collection a team filled
with its own splitter (60 words, no overlap) and the packaged model, evaluated in place, alone and fused with BM25;
the documents OPI retrieved are the store's own similarity search; the collection is unchanged afterwards; an
unreachable server, a missing collection and another dimension are one line each, exit 2, before any example."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from flows.base.errors import EXIT_USER_ERROR
from tests.helpers.cli import free_port, run_cli, wait_for

pytestmark = pytest.mark.slow
LIMIT = 12  # examples evaluated (their articles are all in the collection)


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """`chroma run` (the server chromadb's package includes) on a free loopback port, stopped afterwards."""
    folder = tmp_path_factory.mktemp("chroma")
    port = free_port()
    chroma = Path(sys.executable).with_name("chroma")
    server = subprocess.Popen([str(chroma), "run", "--path", str(folder / "data"), "--host", "127.0.0.1", "--port",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import chromadb

        def up():
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
                return True
            except Exception:  # noqa: BLE001 - not listening yet
                return server.poll() is not None
        wait_for(up, 60, "the Chroma server to listen")
        assert server.poll() is None, "chroma run exited"
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def team_collection(chroma_server, embedder):
    """The bundled articles split as another pipeline would (60 words, no overlap, LangChain's default separators),
    embedded with the packaged model, added to a collection."""
    import chromadb
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    import opi

    splitter = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0, length_function=lambda t: len(t.split()))
    lines = (Path(opi.__file__).parent / "datasets" / "deeplogic-130" / "articles.jsonl").read_text().splitlines()
    pieces = [piece for line in lines for piece in splitter.split_text(json.loads(line)["context"])]
    client = chromadb.HttpClient(host="127.0.0.1", port=chroma_server)
    collection = client.create_collection("team-docs")
    collection.add(ids=[f"doc-{i}" for i in range(len(pieces))], documents=pieces,
                   embeddings=embedder.embed_documents(pieces))
    return client


def checksum(client) -> tuple[int, str]:
    got = client.get_collection("team-docs").get(include=["documents"])
    return len(got["ids"]), hashlib.sha256(repr(sorted(zip(got["ids"], got["documents"]))).encode()).hexdigest()


def store(port: int, name: str = "retriever") -> list[str]:
    return [f"{name}.backend=chroma", f"{name}.url=http://127.0.0.1:{port}", f"{name}.collection=team-docs"]


def predictions(tmp_path: Path) -> list[pd.DataFrame]:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["opi"], order_by=["start_time ASC"])
    found = []
    for _, run in runs[runs["tags.opi.role"] == "configuration"].iterrows():
        folder = mlflow.artifacts.download_artifacts(run_id=run["run_id"], dst_path=str(tmp_path / run["run_id"]))
        found.append((run, pd.read_parquet(Path(folder) / "predictions.parquet")))
    return found


def test_a_chroma_collection_is_evaluated_in_place_alone_and_fused_with_bm25(tmp_path, chroma_server,
                                                                                team_collection, embedder):
    from langchain_chroma import Chroma

    before = checksum(team_collection)
    run_cli("flows.cli.evaluate", tmp_path, "retriever=vectorstore", *store(chroma_server), "retrieval.scope=corpus",
            f"dataset.limit={LIMIT}")
    run_cli("flows.cli.evaluate", tmp_path, "setup=a_two", "+retriever@retrievers.team=vectorstore",
            *store(chroma_server, "retrievers.team"), "combination.members=[team,bm25]", "retrieval.scope=corpus",
            f"dataset.limit={LIMIT}")
    (single, rows), (fused, fused_rows) = predictions(tmp_path)
    direct = Chroma(collection_name="team-docs", client=team_collection, embedding_function=embedder,
                    create_collection_if_not_exists=False)
    for _, row in rows.iterrows():
        expected = [d.id for d in direct.similarity_search(row["question"], k=4)]
        assert list(row["store_ids"]) == expected, row["question"]
    assert single["metrics.store_documents"] == before[0] and single["metrics.store_documents_not_found"] == 0
    assert single["tags.opi.vectorstore"] == f"chroma http://127.0.0.1:{chroma_server}, collection 'team-docs'"
    assert single["tags.opi.vectorstore.server"].startswith("Chroma 1.")  # the server's own version
    assert 0 < single["metrics.bertsim"] <= 1 and 0 <= single["metrics.right_article"] <= 1
    assert single["metrics.ndcg_at_4"] >= 0  # the IR metrics are computed on the store's documents
    # fused with BM25: four of the store's documents, ranked by both
    assert all(len(ids) == 4 and all(i.startswith("doc-") for i in ids) for ids in fused_rows["store_ids"])
    assert [list(ids) for ids in fused_rows["store_ids"]] != [list(ids) for ids in rows["store_ids"]]
    assert checksum(team_collection) == before  # nothing written to the store


def test_a_store_that_cannot_be_evaluated_is_one_line_before_any_example(tmp_path, chroma_server, team_collection):
    narrow = team_collection.get_or_create_collection("narrow")  # filled with another model: 8 numbers a vector
    narrow.add(ids=["n1", "n2"], documents=["one text", "another text"], embeddings=[[0.1] * 8, [0.2] * 8])
    team_collection.get_or_create_collection("empty")
    foreign = team_collection.get_or_create_collection("foreign")  # the model's width, text of no article
    foreign.add(ids=["f1", "f2"], documents=["one text", "another text"], embeddings=[[0.1] * 384, [0.2] * 384])
    dead = free_port()
    cases = {f"retriever.url=http://127.0.0.1:{dead}": f"chroma http://127.0.0.1:{dead}, collection 'team-docs': "
                                                        "cannot be reached",
             "retriever.collection=team-doc": "has no such collection (it has: empty, foreign, narrow, team-docs)",
             "retriever.collection=narrow": "holds 8-dimensional vectors, the query embedding gives 384",
             "retriever.collection=empty": "collection 'empty': holds no documents: nothing to retrieve",
             "retriever.collection=foreign": "none of the 2 documents of the chroma"}
    for override, said in cases.items():
        output = run_cli("flows.cli.evaluate", tmp_path, "retriever=vectorstore", *store(chroma_server), override,
                         "dataset.limit=2", expect=EXIT_USER_ERROR)
        assert said in output, output[-2000:]
        assert "Traceback" not in output and "BERTSim" not in output and "stage results" not in output


def test_a_qdrant_local_collection_is_evaluated_in_place_alone_and_fused_with_bm25(tmp_path, embedder):
    from langchain_qdrant import QdrantVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from qdrant_client import QdrantClient, models

    import opi

    splitter = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0, length_function=lambda t: len(t.split()))
    lines = (Path(opi.__file__).parent / "datasets" / "deeplogic-130" / "articles.jsonl").read_text().splitlines()
    pieces = [piece for line in lines for piece in splitter.split_text(json.loads(line)["context"])]
    path = str(tmp_path / "qdrant")
    client = QdrantClient(path=path)
    vectors = embedder.embed_documents(pieces)
    client.create_collection("team", vectors_config=models.VectorParams(size=len(vectors[0]),
                                                                         distance=models.Distance.COSINE))
    client.upsert("team", points=[models.PointStruct(id=i, vector=v, payload={"page_content": p})
                                  for i, (p, v) in enumerate(zip(pieces, vectors))])

    def checksum():
        points, _ = client.scroll("team", limit=10_000, with_payload=True)
        return len(points), hashlib.sha256(repr(sorted((p.id, p.payload["page_content"]) for p in points)).encode()
                                           ).hexdigest()

    before = checksum()
    client.close()  # local mode: one client a folder
    qdrant = ["retriever.backend=qdrant", f"retriever.path={path}", "retriever.collection=team"]
    run_cli("flows.cli.evaluate", tmp_path, "retriever=vectorstore", *qdrant, "retrieval.scope=corpus",
            f"dataset.limit={LIMIT}")
    run_cli("flows.cli.evaluate", tmp_path, "setup=a_two", "+retriever@retrievers.team=vectorstore",
            *(o.replace("retriever.", "retrievers.team.") for o in qdrant), "combination.members=[team,bm25]",
            "retrieval.scope=corpus", f"dataset.limit={LIMIT}")
    (single, rows), (fused, fused_rows) = predictions(tmp_path)
    client = QdrantClient(path=path)
    direct = QdrantVectorStore(client=client, collection_name="team", embedding=embedder)
    for _, row in rows.iterrows():
        assert list(row["store_ids"]) == [str(d.metadata["_id"]) for d in direct.similarity_search(row["question"],
                                                                                                   k=4)]
    assert single["metrics.store_documents"] == len(pieces) and single["tags.opi.vectorstore.server"].startswith(
        "Qdrant local mode")
    assert all(len(ids) == 4 for ids in fused_rows["store_ids"]) and fused["metrics.bertsim"] > 0
    assert checksum() == before
    client.close()
