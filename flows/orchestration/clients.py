"""The chat clients the stage tasks use: settings from the ``llm`` config, the persistent call cache, and the local
LLM server (started once per process on 127.0.0.1, stopped at exit, Ctrl-C included)."""
from __future__ import annotations

import atexit
import dataclasses
import logging
from pathlib import Path
from typing import Any

from tqdm import tqdm

from opi.llm.cache import CallCache
from opi.llm.client import ChatClient
from opi.llm.local_server import LocalLLMServer
from opi.memory import MEMORY
from opi.schemas import LLMConfig, LocalServerConfig

log = logging.getLogger("opi")


def local_server(spec: LocalServerConfig) -> LocalLLMServer:
    def start() -> LocalLLMServer:
        server = LocalLLMServer(spec.model, spec.threads, spec.context, spec.parallel).start()
        atexit.register(server.stop)
        log.info("local LLM server (%s) on %s", spec.model, server.base_url)
        return server
    return MEMORY.recall("chat servers", repr(dataclasses.astuple(spec)), start)


def client_for(llm: LLMConfig, cache_path: str, model: str | None = None) -> ChatClient:
    """The run's chat client; ``model``: another model on the same endpoint (a fine-tuned classifier)."""
    settings = dataclasses.replace(llm, model=model) if model else llm
    if llm.local_server is None:
        return ChatClient(settings, CallCache(cache_path))
    server = local_server(llm.local_server)
    return ChatClient(settings, CallCache(cache_path), base_url=server.base_url,
                      cache_id=f"local:{Path(str(server.model)).name}")


def progress_bar(total: int, description: str, client: ChatClient):
    """A tqdm bar with ETA and running cost, shown only on a terminal."""
    bar = tqdm(total=total, desc=description, unit="call", disable=None, leave=False)

    def update(n: int) -> None:
        bar.update(n)
        bar.set_postfix(cost=f"${client.usage.cost:.4f}", refresh=False)

    return bar, update
