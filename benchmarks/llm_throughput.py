"""LLM call throughput: 40 calls to an OpenAI-shaped server adding 200 ms per call, at concurrency 1 and 8.

    python benchmarks/llm_throughput.py [--calls 40] [--latency 0.2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opi.llm.client import ChatClient, LLMSettings  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402


def timed(base_url: str, calls: int, concurrency: int) -> float:
    client = ChatClient(LLMSettings(model="fake", base_url=base_url, api_key_env=None, concurrency=concurrency))
    requests = [([{"role": "user", "content": f"question {i}"}], None) for i in range(calls)]
    started = time.perf_counter()
    answers = client.complete_many(requests)
    elapsed = time.perf_counter() - started
    assert len(answers) == calls and all(answers) and client.usage.http_requests == calls
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    with FakeOpenAI(latency=args.latency) as server:
        timed(server.base_url, 2, 2)  # warm-up: imports, first connection
        serial = timed(server.base_url, args.calls, 1)
        parallel = timed(server.base_url, args.calls, 8)
    print(f"{args.calls} calls, {args.latency * 1000:.0f} ms server latency")
    print(f"{'concurrency':>12} {'seconds':>8} {'calls/s':>8}")
    print(f"{1:>12} {serial:>8.2f} {args.calls / serial:>8.1f}")
    print(f"{8:>12} {parallel:>8.2f} {args.calls / parallel:>8.1f}")
    print(f"speed-up {serial / parallel:.1f}x; goal: concurrency 8 under 2.5 s -> "
          f"{'met' if parallel < 2.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
