# Two entry points (see README): `make demo` and `make test`. Everything else is a step of them.
SHELL := /bin/bash
PY    ?= python3
VENV  ?= .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install test-deps peer-fastembed env services services-down migrate run-api run-worker lint unit integration e2e bench bench-legacy clean browser ocr netns-tools

# The runtime venv (the services, the demo, the CLI): ONNX Runtime, no torch (issue 30).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps $$($(PY) -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["rag-indexing"]["no-deps"]))')
	touch $(STAMP)

# The build venv: torch, only to export the fused ONNX graph (the `build-model` extra). CPU torch
# first, pinned: an unpinned torch pulls GBs of CUDA wheels.
BUILD_VENV ?= .venv-build
BUILD_BIN  := $(BUILD_VENV)/bin
BUILD_STAMP := $(BUILD_VENV)/.installed
$(BUILD_STAMP): pyproject.toml
	test -x $(BUILD_BIN)/python || $(PY) -m venv $(BUILD_VENV)
	$(BUILD_BIN)/pip install -q --upgrade pip
	$(BUILD_BIN)/pip install -q torch==2.13.0
	$(BUILD_BIN)/pip install -q -e '.[build-model]'
	touch $(BUILD_STAMP)

# the embedding model as a fused ONNX graph (EMBEDDING_RUNTIME=onnx), built by the build venv into
# the runtime venv's model folder: once (~8 s), then only checked against the model's weights (~0.3 s)
install: $(STAMP) $(BUILD_STAMP)
	$(BUILD_BIN)/python -m shared.adapters.embedding.onnx_graph --model-dir "$$($(BIN)/python -m shared.adapters.embedding.models)"

# What the tests and benchmarks add to the runtime venv: torch for EMBEDDING_RUNTIME=torch's tests
# and the peer of bench/peer.py (LlamaIndex + HuggingFaceEmbedding), whose smoke `make test` runs.
TEST_STAMP := $(VENV)/.installed-test
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,build-model,peer]'
	touch $(TEST_STAMP)
test-deps: install $(TEST_STAMP) peer-fastembed

# The second peer of bench/peer.py (issue 30): LlamaIndex + FastEmbedEmbedding in a venv of its own
# (fastembed needs huggingface-hub < 2, transformers 5 needs >= 2.4): only the `peer-fastembed` extra's
# packages, no torch; bench/peer_side.py runs there from the checkout.
FASTEMBED_VENV ?= .venv-fastembed
FASTEMBED_STAMP := $(FASTEMBED_VENV)/.installed
$(FASTEMBED_STAMP): pyproject.toml
	test -x $(FASTEMBED_VENV)/bin/python || $(PY) -m venv $(FASTEMBED_VENV)
	$(FASTEMBED_VENV)/bin/pip install -q --upgrade pip
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["peer-fastembed"]))' > $(FASTEMBED_VENV)/requirements.txt
	$(FASTEMBED_VENV)/bin/pip install -q -r $(FASTEMBED_VENV)/requirements.txt
	touch $(FASTEMBED_STAMP)
# ... and the model folder it loads (bench/fastembed_model.py: an ONNX export of the same files, by the build venv)
peer-fastembed: $(FASTEMBED_STAMP) $(BUILD_STAMP)
	$(BUILD_BIN)/python -m bench.fastembed_model $(FASTEMBED_VENV)/minilm

env:
	scripts/gen-env.sh

services: install env ocr
	scripts/services.sh up

services-down:
	scripts/services.sh down

migrate: services
	$(BIN)/python -m shared.adapters.postgres.migrate

demo: migrate
	scripts/demo.sh

run-api: migrate
	$(BIN)/python -m knowledge_service

run-worker: migrate
	$(BIN)/python -m task_service

lint: test-deps
	$(BIN)/ruff check shared knowledge_service task_service rag_cli tests bench scripts
	$(BIN)/mypy

# The unit tier runs with the network cut (scripts/offline.sh): fakes only, no service.
unit: test-deps
	scripts/offline.sh $(BIN)/python -m pytest tests/unit -q -p no:cacheprovider -n 2

integration: services test-deps
	$(BIN)/python -m pytest tests/integration -q

# Debian's chromium for the admin page's browser tests (Playwright drives /usr/bin/chromium; it
# never downloads a browser). Idempotent: installs only when missing.
browser:
	test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The system packages of deploy/system-packages.txt (Tesseract's language data for OCR, fonts; the
# OCR engine itself comes in the tesserocr wheel): the same list the Dockerfile installs. OCR_LANGUAGES
# names the languages; each needs its tesseract-ocr-<lang> there. Idempotent: apt only when missing.
SYSTEM_PACKAGES := $(shell sed -e 's/\#.*//' deploy/system-packages.txt)
ocr:
	dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES); }

# ip (network namespaces) and socat (forwarders) for bench/hosts.py's simulated hosts (issue 19 item 5).
# Idempotent: apt only when missing.
netns-tools:
	command -v ip >/dev/null && command -v socat >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 socat; }

e2e: services browser test-deps
	$(BIN)/python -m pytest tests/e2e -q

test: services browser netns-tools test-deps
	$(BIN)/ruff check shared knowledge_service task_service rag_cli tests bench scripts
	$(BIN)/mypy
	scripts/offline.sh $(BIN)/python -m pytest tests/unit -q -p no:cacheprovider -n 2
	$(BIN)/python -m pytest tests/integration tests/e2e -q -p no:cacheprovider
	# every benchmark in smoke mode (tiny sizes, nothing written): the harness keeps working
	$(BIN)/python -m bench.smoke

# Benchmarks: each writes its section of bench/RESULTS.md (figures as ratios or MB/s measured in one run).
# P1-P6 of issue 13: upload (P1), throughput + memory (P2, P5), workers (P4), drain (P6).
bench: migrate netns-tools test-deps
	# PyICU (a bench candidate) builds from source against ICU's headers
	dpkg -s libicu-dev pkg-config >/dev/null 2>&1 || apt-get install -y -q libicu-dev pkg-config
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/python -m bench.parsers
	$(BIN)/python -m bench.chunking
	$(BIN)/python -m bench.pdf_columns
	$(BIN)/python -m bench.csv_sniff
	$(BIN)/python -m bench.retrieval
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.upload
	$(BIN)/python -m bench.throughput
	$(BIN)/python -m bench.workers
	$(BIN)/python -m bench.drain
	$(BIN)/python -m bench.model_calls
	$(BIN)/python -m bench.parts
	$(BIN)/python -m bench.parts --mode real
	$(BIN)/python -m bench.parts --mode small
	# the tests CI runs at a smaller size, at full size: the partition suite with every cut point
	# (CI: the commit cut only; issue 19) and the whole corpus with the whole novel (CI: its first 256 KB)
	RAG_PARTITION_FULL=1 $(BIN)/python -m pytest tests/e2e/test_partitions.py -q -s -p no:cacheprovider
	RAG_CORPUS_FULL=1 $(BIN)/python -m pytest tests/e2e/test_pipeline.py -q -p no:cacheprovider -k every_corpus_file
	$(BIN)/python -m bench.hosts
	$(BIN)/python -m bench.cluster
	$(BIN)/python -m bench.peer --load 2
	$(BIN)/python -m bench.embed_threads
	$(BIN)/python -m bench.precision
	$(BIN)/python -m bench.search_layers
	$(BIN)/python -m bench.kept_text
	$(BIN)/python -m bench.edge
	$(BIN)/python -m bench.term_stats
	$(BIN)/python -m bench.swap

# The legacy Office readers against their candidates (bench/legacy_readers.py): LibreOffice writes the
# generated .doc/.xls/.ppt and is a candidate; antiword and catdoc (catppt, xls2csv) are candidates.
# Bench only: the readers chosen need no system package. REAL=dir adds a folder of real files.
LEGACY_BENCH_PACKAGES := libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui antiword catdoc
bench-legacy:
	dpkg -s $(LEGACY_BENCH_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(LEGACY_BENCH_PACKAGES); }
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/python -m bench.legacy_readers $(if $(REAL),--real $(REAL))

clean:
	rm -rf $(VENV) $(BUILD_VENV) $(FASTEMBED_VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
