"""OpenAI fine-tuning of a relation classifier, the paper's recipe: chat examples with a system prompt holding the
label definitions, the user turn = context + question + answer, the assistant turn = the label.

``chat_messages`` is the one source of truth for that format: it writes the training file *and* builds the
requests of ``classifier=finetuned`` at evaluation time. Jobs are tagged with a hash of the training file
(``metadata.opi_data_sha256``): a re-run with the same data finds the existing job instead of paying twice.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from opi.llm.prompts import load_prompt
from opi.relations import RelationSet, Triple

MAX_TOKENS_PER_EXAMPLE = 65_536  # OpenAI's limit for gpt-4o fine-tuning examples
DONE = {"succeeded", "failed", "cancelled"}


def estimate_tokens(text: str) -> int:
    """About four characters a token for English prose (no tokenizer download needed offline)."""
    return max(1, len(text) // 4)


def chat_messages(triple: Triple, relations: RelationSet) -> list[dict[str, str]]:
    definitions = "\n".join(f"- {label}: {text}" for label, text in relations.definitions.items())
    system = load_prompt("finetune_system").render(definitions=definitions)
    user = f"Context:\n{triple.text}\n\nQuestion: {triple.question}\n\nAnswer: {triple.answer}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def training_lines(triples: Sequence[Triple], labels: Sequence[str], relations: RelationSet) -> list[str]:
    return [json.dumps({"messages": chat_messages(t, relations) + [{"role": "assistant", "content": label}]},
                       ensure_ascii=False) for t, label in zip(triples, labels)]


@dataclass
class FileReport:
    examples: int
    tokens: int
    max_example_tokens: int
    label_counts: dict[str, int]
    sha256: str


def validate_training_file(path: str | Path, relations: RelationSet) -> FileReport:
    """Check every line of a chat fine-tuning JSONL; raise ValueError naming the line that is wrong."""
    tokens, longest, counts = 0, 0, {label: 0 for label in relations.labels}
    raw = Path(path).read_bytes()
    lines = raw.decode("utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            messages = json.loads(line)["messages"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}, line {number}: not a JSON object with 'messages'") from None
        roles = [m.get("role") for m in messages]
        if roles != ["system", "user", "assistant"] or not all(isinstance(m.get("content"), str) for m in messages):
            raise ValueError(f"{path}, line {number}: expected system, user, assistant messages with text, got {roles}")
        label = messages[-1]["content"]
        if label not in counts:
            raise ValueError(f"{path}, line {number}: assistant label {label!r} is not in the label set")
        counts[label] += 1
        size = sum(estimate_tokens(m["content"]) for m in messages)
        if size > MAX_TOKENS_PER_EXAMPLE:
            raise ValueError(f"{path}, line {number}: about {size} tokens, over the {MAX_TOKENS_PER_EXAMPLE} limit")
        tokens += size
        longest = max(longest, size)
    missing = [label for label, n in counts.items() if n == 0]
    if missing:
        raise ValueError(f"{path}: no training example for {missing}; every label needs examples")
    return FileReport(len(lines), tokens, longest, counts, hashlib.sha256(raw).hexdigest())


def find_or_create_job(client, training_path: str | Path, report: FileReport, base_model: str, suffix: str,
                       seed: int, n_epochs: int | None = None, log: Callable[[str], None] = print):
    """The job fine-tuning this exact file (any state but failed/cancelled), else a new one on a fresh upload."""
    metadata = {"opi_data_sha256": report.sha256[:32], "opi_base_model": base_model[:64]}
    for job in client.fine_tuning.jobs.list(metadata=metadata, limit=100):
        if job.status not in ("failed", "cancelled"):
            log(f"found fine-tuning job {job.id} ({job.status}) for this training file: not creating another")
            return job, False
    with open(training_path, "rb") as handle:
        uploaded = client.files.create(file=handle, purpose="fine-tune")
    hyperparameters = {"n_epochs": n_epochs} if n_epochs else None
    kwargs = {"hyperparameters": hyperparameters} if hyperparameters else {}
    job = client.fine_tuning.jobs.create(model=base_model, training_file=uploaded.id, suffix=suffix, seed=seed,
                                         metadata=metadata, **kwargs)
    log(f"uploaded {uploaded.id}, created fine-tuning job {job.id}")
    return job, True


def wait_for_job(client, job_id: str, first_wait: float = 30.0, max_wait: float = 600.0, timeout: float = 86400.0,
                 log: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep):
    """Poll with exponential backoff until the job ends; logs new events. Returns the final job."""
    started, wait, seen = time.monotonic(), first_wait, set()
    while True:
        job = client.fine_tuning.jobs.retrieve(job_id)
        for event in reversed(list(client.fine_tuning.jobs.list_events(job_id, limit=20))):
            if event.id not in seen:
                seen.add(event.id)
                log(f"{job_id}: {event.message}")
        if job.status in DONE:
            return job
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"fine-tuning job {job_id} still {job.status} after {timeout:.0f} s; re-run to resume")
        sleep(wait)
        wait = min(wait * 2, max_wait)
