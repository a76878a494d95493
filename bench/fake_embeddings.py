"""A stand-in OpenAI-compatible embeddings server with a fixed latency (P4 of issue 13).

``python -m bench.fake_embeddings --port N [--latency-ms 200] [--dim 384]`` serves
``POST /v1/embeddings``: after ``latency-ms`` (asyncio sleep: requests overlap freely) it answers
``{"data": [{"index": i, "embedding": [...]}]}`` with a deterministic unit vector per input text
(seeded by its SHA-256), as ``shared.adapters.embedding.openai_compat`` expects.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def vector(text: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return [float(x) for x in v / np.linalg.norm(v)]


def app(latency_s: float, dim: int) -> Starlette:
    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        await asyncio.sleep(latency_s)
        return JSONResponse({"object": "list", "model": body.get("model", "fake"),
                             "data": [{"object": "embedding", "index": i, "embedding": vector(t, dim)}
                                      for i, t in enumerate(texts)]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"]), Route("/healthz", health)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--dim", type=int, default=384)
    args = ap.parse_args()
    uvicorn.run(app(args.latency_ms / 1000, args.dim), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
