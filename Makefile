# Two entry points (see README): `make demo` and `make test`. Everything else is a step of them.
SHELL := /bin/bash
PY    ?= python3
VENV  ?= .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install env services services-down migrate run-api run-worker lint unit integration e2e bench bench-legacy clean browser ocr netns-tools

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU torch first, pinned: an unpinned torch pulls GBs of CUDA wheels
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,peer]'
	touch $(STAMP)

# the embedding model as a fused ONNX graph (EMBEDDING_RUNTIME=onnx): built once (~8 s), then
# only checked against the model's weights (~0.3 s)
install: $(STAMP)
	$(BIN)/python -m shared.adapters.embedding.onnx_graph

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

lint: install
	$(BIN)/ruff check shared knowledge_service task_service rag_cli tests bench scripts
	$(BIN)/mypy

# The unit tier runs with the network cut (scripts/offline.sh): fakes only, no service.
unit: install
	scripts/offline.sh $(BIN)/python -m pytest tests/unit -q -p no:cacheprovider -n 2

integration: services
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

e2e: services browser
	$(BIN)/python -m pytest tests/e2e -q

test: services browser netns-tools
	$(BIN)/ruff check shared knowledge_service task_service rag_cli tests bench scripts
	$(BIN)/mypy
	scripts/offline.sh $(BIN)/python -m pytest tests/unit -q -p no:cacheprovider -n 2
	$(BIN)/python -m pytest tests/integration tests/e2e -q -p no:cacheprovider
	# every benchmark in smoke mode (tiny sizes, nothing written): the harness keeps working
	$(BIN)/python -m bench.smoke

# Benchmarks: each writes its section of bench/RESULTS.md (figures as ratios or MB/s measured in one run).
# P1-P6 of issue 13: upload (P1), throughput + memory (P2, P5), workers (P4), drain (P6).
bench: migrate netns-tools
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
	$(BIN)/python -m bench.peer
	$(BIN)/python -m bench.search_layers
	$(BIN)/python -m bench.kept_text
	$(BIN)/python -m bench.edge
<<<<<<< HEAD
	$(BIN)/python -m bench.term_stats
=======
	$(BIN)/python -m bench.swap

# The legacy Office readers against their candidates (bench/legacy_readers.py): LibreOffice writes the
# generated .doc/.xls/.ppt and is a candidate; antiword and catdoc (catppt, xls2csv) are candidates.
# Bench only: the readers chosen need no system package. REAL=dir adds a folder of real files.
LEGACY_BENCH_PACKAGES := libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui antiword catdoc
bench-legacy:
	dpkg -s $(LEGACY_BENCH_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(LEGACY_BENCH_PACKAGES); }
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/python -m bench.legacy_readers $(if $(REAL),--real $(REAL))
>>>>>>> main

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
