"""The fake OpenAI-compatible server (``tests.helpers.fake_openai``), recording the model and the Authorization header
of every request: what a test of keys sent where needs."""
from __future__ import annotations

import io
import json

from tests.helpers.fake_openai import FakeOpenAI

PLACEHOLDER = None  # the Authorization header a request carries when a run names no key variable: none


class RecordingOpenAI(FakeOpenAI):
    def __init__(self, **kwargs):
        self.requests: list[tuple[str | None, str | None]] = []  # (model, Authorization header)
        super().__init__(**kwargs)

    def _handler(self):
        fake, base = self, super()._handler()

        class Recording(base):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.rfile = io.BytesIO(body)  # the fake reads it again
                with fake.lock:
                    fake.requests.append((json.loads(body or b"{}").get("model"), self.headers.get("Authorization")))
                super().do_POST()

        return Recording

    def authorizations(self) -> dict[str, set[str | None]]:
        """The Authorization headers each model's requests carried."""
        found: dict[str, set[str | None]] = {}
        for model, header in self.requests:
            found.setdefault(model, set()).add(header)
        return found
