"""Embedders: the OpenAI-compatible client against a real local HTTP server (127.0.0.1, ephemeral
port, real sockets; no mocks). The bundled MiniLM model (seconds to load) is tested in
``tests/integration/test_local_model.py``."""

from __future__ import annotations

import hashlib
import json
import platform
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from shared.adapters.embedding import Embedder, OpenAIEmbedder, SentenceTransformerEmbedder, build_embedder, onnx_graph
from shared.adapters.embedding.local import pin_malloc_mmap_threshold
from shared.adapters.embedding.onnx_runtime import mean_pool_normalize
from shared.domain.errors import (
    DependencyMissingError,
    EmbeddingTimeoutError,
    EmbeddingUnavailableError,
    PermanentError,
    TransientError,
)

FAKE_DIM = 8


def test_missing_local_model_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(DependencyMissingError):
        SentenceTransformerEmbedder(model_path=str(tmp_path / "nowhere"))


def _model_dir(tmp_path: Path, weights: bytes = b"weights") -> Path:
    (tmp_path / "modules.json").write_text("[]")
    (tmp_path / "model.safetensors").write_bytes(weights)
    return tmp_path


def test_a_missing_onnx_graph_names_the_command_that_builds_it(tmp_path: Path) -> None:
    with pytest.raises(DependencyMissingError, match=r"python -m shared\.adapters\.embedding\.onnx_graph"):
        SentenceTransformerEmbedder(model_path=str(_model_dir(tmp_path)), runtime="onnx")


def test_a_graph_built_from_other_weights_is_refused(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path)
    (model_dir / "onnx").mkdir()
    (model_dir / onnx_graph.GRAPH_NAME).write_bytes(b"graph")
    manifest = model_dir / onnx_graph.MANIFEST_NAME
    manifest.write_text(json.dumps({"source_sha256": hashlib.sha256(b"older weights").hexdigest()}))
    assert not onnx_graph.is_current(model_dir)
    with pytest.raises(DependencyMissingError, match="other weights"):
        onnx_graph.fused_graph(model_dir)
    manifest.write_text(json.dumps({"source_sha256": hashlib.sha256(b"weights").hexdigest()}))
    assert onnx_graph.fused_graph(model_dir) == model_dir / onnx_graph.GRAPH_NAME


def test_each_precision_has_its_own_graph_and_a_missing_one_is_refused(tmp_path: Path) -> None:
    """EMBEDDING_PRECISION picks a graph of its own; the fp32 graph never stands in for the int8 one."""
    model_dir = _model_dir(tmp_path)
    (model_dir / "onnx").mkdir()
    (model_dir / onnx_graph.GRAPH_NAME).write_bytes(b"graph")
    (model_dir / onnx_graph.MANIFEST_NAME).write_text(json.dumps({"source_sha256": hashlib.sha256(b"weights")
                                                                  .hexdigest()}))
    assert onnx_graph.graph_names("fp32") == (onnx_graph.GRAPH_NAME, onnx_graph.MANIFEST_NAME)
    assert onnx_graph.is_current(model_dir) and not onnx_graph.is_current(model_dir, "int8-dynamic")
    with pytest.raises(DependencyMissingError, match="int8-dynamic"):
        SentenceTransformerEmbedder(model_path=str(model_dir), runtime="onnx", precision="int8-dynamic")
    with pytest.raises(ValueError, match="precision"):
        onnx_graph.graph_names("fp8")


def test_an_unknown_runtime_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="runtime"):
        SentenceTransformerEmbedder(model_path=str(_model_dir(tmp_path)), runtime="tensorflow")


def test_mean_pooling_ignores_padding_and_normalizes() -> None:
    hidden = np.array([[[3.0, 4.0], [100.0, 100.0]], [[1.0, 0.0], [0.0, 1.0]]], dtype=np.float32)
    mask = np.array([[1, 0], [1, 1]])
    np.testing.assert_allclose(mean_pool_normalize(hidden, mask), [[0.6, 0.8], [2 ** -0.5, 2 ** -0.5]], atol=1e-6)


def test_malloc_mmap_threshold_is_pinned_under_glibc() -> None:
    # The worker's RSS grew ~0.14 MB per chunk embedded without it (issue 13 P5, /work/helpers/mem.md).
    assert pin_malloc_mmap_threshold() is (platform.libc_ver()[0] == "glibc")


# ---------------------------------------------------------------- OpenAI-compatible client


def fake_vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 127.5 for b in digest[:FAKE_DIM]]


class FakeEmbeddingServer(BaseHTTPRequestHandler):
    """Routes by path prefix: /ok, /hang, /fail500, /busy429, /reject400, /wrongdim, /garbage."""

    requests: ClassVar[list[dict[str, Any]]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        route = self.path.split("/")[1]
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if route == "hang":
            type(self).release.wait(timeout=10)
            return self._send(200, {"data": []})
        if route == "fail500":
            return self._send(500, {"error": {"message": "model crashed"}})
        if route == "busy429":
            return self._send(429, {"error": {"message": "slow down"}})
        if route == "reject400":
            return self._send(400, {"error": {"message": "input too long"}})
        if route == "garbage":
            return self._send(200, "<html>proxy error</html>")
        dim = FAKE_DIM - 1 if route == "wrongdim" else FAKE_DIM
        rows = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t)[:dim]} for i, t in enumerate(body["input"])
        ]
        rows.reverse()  # the API does not promise input order; the client must sort by index
        return self._send(200, {"object": "list", "data": rows, "model": body["model"]})

    def _send(self, status: int, payload: Any) -> None:
        raw = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:  # the client gave up (timeout test)
            pass


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEmbeddingServer)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        FakeEmbeddingServer.release.set()
        server.shutdown()
        server.server_close()


def client(url: str, timeout_s: float = 5.0, batch_size: int = 3) -> OpenAIEmbedder:
    return OpenAIEmbedder(url, "fake-model", "sk-test", FAKE_DIM, batch_size=batch_size, timeout_s=timeout_s)


@pytest.mark.asyncio
async def test_openai_success_batches_orders_and_normalizes(server_url: str) -> None:
    FakeEmbeddingServer.requests.clear()
    embedder = client(f"{server_url}/ok")
    assert isinstance(embedder, Embedder)
    texts = [f"text {i}" for i in range(7)]
    try:
        matrix = await embedder.embed(texts)
    finally:
        await embedder.aclose()
    assert matrix.shape == (7, FAKE_DIM) and matrix.dtype == np.float32
    expected = np.array([fake_vector(t) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(matrix, expected, atol=1e-6)
    assert [len(r["body"]["input"]) for r in FakeEmbeddingServer.requests] == [3, 3, 1]
    assert {r["path"] for r in FakeEmbeddingServer.requests} == {"/ok/v1/embeddings"}
    assert {r["auth"] for r in FakeEmbeddingServer.requests} == {"Bearer sk-test"}
    assert {r["body"]["model"] for r in FakeEmbeddingServer.requests} == {"fake-model"}


@pytest.mark.asyncio
async def test_openai_accepts_a_base_url_ending_in_v1(server_url: str) -> None:
    embedder = build_embedder(
        "openai", base_url=f"{server_url}/ok/v1/", model="m", api_key=None, dim=FAKE_DIM, batch_size=2, timeout_s=5
    )
    try:
        assert (await embedder.embed(["a", "b", "c"])).shape == (3, FAKE_DIM)
    finally:
        assert isinstance(embedder, OpenAIEmbedder)
        await embedder.aclose()


@pytest.mark.asyncio
async def test_openai_hanging_endpoint_times_out(server_url: str) -> None:
    embedder = client(f"{server_url}/hang", timeout_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(EmbeddingTimeoutError) as info:
            await embedder.embed(["never answered"])
    finally:
        await embedder.aclose()
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 2.0, elapsed
    assert isinstance(info.value, TransientError) and info.value.error_code == "embedding_timeout"


@pytest.mark.asyncio
@pytest.mark.parametrize("route", ["fail500", "busy429", "garbage"])
async def test_openai_transient_failures(server_url: str, route: str) -> None:
    embedder = client(f"{server_url}/{route}")
    try:
        with pytest.raises(EmbeddingUnavailableError) as info:
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert not isinstance(info.value, EmbeddingTimeoutError)
    assert info.value.error_code == "embedding_unavailable"


@pytest.mark.asyncio
async def test_openai_500_message_carries_the_server_reason(server_url: str) -> None:
    embedder = client(f"{server_url}/fail500")
    try:
        with pytest.raises(EmbeddingUnavailableError, match=r"HTTP 500.*model crashed"):
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("route", "code"), [("reject400", "embedding_rejected"), ("wrongdim", "embedding_dim_mismatch")]
)
async def test_openai_permanent_failures(server_url: str, route: str, code: str) -> None:
    embedder = client(f"{server_url}/{route}")
    try:
        with pytest.raises(PermanentError) as info:
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert info.value.error_code == code


@pytest.mark.asyncio
async def test_openai_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = client(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(EmbeddingUnavailableError) as info:
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert not isinstance(info.value, EmbeddingTimeoutError)


@pytest.mark.asyncio
async def test_openai_empty_input_makes_no_request(server_url: str) -> None:
    FakeEmbeddingServer.requests.clear()
    embedder = client(f"{server_url}/ok")
    try:
        assert (await embedder.embed([])).shape == (0, FAKE_DIM)
    finally:
        await embedder.aclose()
    assert FakeEmbeddingServer.requests == []


@pytest.mark.parametrize("kw", [{"dim": 0}, {"batch_size": 0}, {"timeout_s": 0.0}])
def test_openai_rejects_bad_settings(kw: dict[str, Any]) -> None:
    args: dict[str, Any] = {"dim": 8, "batch_size": 4, "timeout_s": 1.0} | kw
    with pytest.raises(ValueError):
        OpenAIEmbedder("http://127.0.0.1:1", "m", None, **args)
