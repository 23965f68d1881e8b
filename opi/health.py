"""Is a local server up? One plain HTTP GET, no client library: polled ten times a second while a server boots,
so it must cost next to nothing (an ``httpx.get`` builds an SSL context each time: 45 ms of CPU, under the GIL)."""
from __future__ import annotations

import http.client
from urllib.parse import urlsplit


def answers(url: str, timeout: float = 2.0) -> bool:
    """``url`` answers a GET with HTTP 200."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        connection.request("GET", parts.path or "/")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
