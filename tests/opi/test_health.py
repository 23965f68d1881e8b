import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opi.health import answers


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_answers_only_a_200_from_a_listening_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        assert answers(base + "/api/health")
        assert not answers(base + "/api/starting")  # 503
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert not answers(f"http://127.0.0.1:{closed}/api/health", timeout=0.5)
