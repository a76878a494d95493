"""No default stated twice: a config dataclass that keeps defaults of its own (for tests and
library callers) must keep exactly the settings' defaults, field by field. The settings are built
with ``model_construct()``: their declared defaults, no environment, no ``.env``."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from knowledge_service.config import ApiConfig, EventsConfig
from knowledge_service.search.retrieval import SearchParams
from shared.adapters.embedding.configured import EmbedderConfig
from shared.adapters.keepalive import Keepalive
from shared.adapters.postgres.pool import PoolConfig
from shared.adapters.rabbitmq import BrokerConfig
from shared.adapters.redis_lock import RedisConfig
from shared.adapters.s3 import StorageConfig
from shared.bootstrap import UsecaseConfig
from shared.domain.scan_policy import ScanThresholds
from shared.settings import CommonSettings, KnowledgeSettings, WorkerSettings
from task_service.consumer import ConsumerConfig
from task_service.dlq import DlqConfig
from task_service.indexing.config import HandlerConfig
from task_service.jobs.ann_indexer import AnnConfig
from task_service.jobs.cache_evictor import EvictConfig
from task_service.jobs.relay import RelayConfig
from task_service.jobs.scanner import ScanConfig, thresholds
from task_service.jobs.sweep import SweepConfig
from task_service.jobs.term_stats import FoldConfig
from task_service.pipeline.chunk import ChunkSettings
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.sandbox import ParserConfig, SandboxLimits

DEFAULTS = WorkerSettings.model_construct()
API_DEFAULTS = KnowledgeSettings.model_construct()


def _stated_defaults(cls: type[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


@pytest.mark.parametrize("built, cls", [
    (ParseLimits.from_settings(DEFAULTS), ParseLimits),
    (SandboxLimits.from_settings(DEFAULTS), SandboxLimits),
    (ChunkSettings.from_settings(DEFAULTS), ChunkSettings),
    (thresholds(DEFAULTS), ScanThresholds),
    (SearchParams.from_settings(API_DEFAULTS), SearchParams),
], ids=["ParseLimits", "SandboxLimits", "ChunkSettings", "ScanThresholds", "SearchParams"])
def test_every_dataclass_default_is_the_settings_default(built: Any, cls: type[Any]) -> None:
    stated = _stated_defaults(cls)
    assert stated, f"{cls.__name__} states no defaults: drop it from this test"
    assert {name: getattr(built, name) for name in stated} == stated


@pytest.mark.parametrize("cls", [HandlerConfig, ConsumerConfig, PoolConfig, Keepalive, StorageConfig, RelayConfig,
                                 ScanConfig, SweepConfig, EvictConfig, FoldConfig, ApiConfig, EventsConfig,
                                 BrokerConfig, RedisConfig, EmbedderConfig, ParserConfig, UsecaseConfig, DlqConfig])
def test_adapter_configs_state_no_defaults(cls: type[Any]) -> None:
    """Built only by ``from_settings`` in a composition root: the settings hold every default."""
    assert _stated_defaults(cls) == {}


def test_the_configs_are_built_from_the_settings() -> None:
    assert PoolConfig.from_settings(DEFAULTS, max_size=2).max_size == 2
    consumer = ConsumerConfig.from_settings(DEFAULTS)
    assert consumer.broker == BrokerConfig.from_settings(DEFAULTS) == DlqConfig.from_settings(DEFAULTS).broker
    assert (consumer.broker.delay_ms, consumer.prefetch) == (DEFAULTS.delay_ms, DEFAULTS.prefetch)
    assert "redis://" not in repr(RedisConfig.from_settings(DEFAULTS))
    assert EmbedderConfig.from_settings(DEFAULTS, threads=1).threads == 1
    assert ParserConfig.from_settings(DEFAULTS).sandbox is DEFAULTS.parse_sandbox
    assert UsecaseConfig.from_settings(DEFAULTS).dispatch_limit == DEFAULTS.dispatch_limit
    assert RelayConfig.from_settings(DEFAULTS).dispatch_limit == DEFAULTS.dispatch_limit
    assert ScanConfig.from_settings(DEFAULTS).thresholds == thresholds(DEFAULTS)
    api = ApiConfig.from_settings(API_DEFAULTS.model_copy(update={"search_rrf_k": 7, "events_resync_s": 9.0}))
    assert (api.search.rrf_k, api.events.resync_s, api.embedding_dim) == (7, 9.0, API_DEFAULTS.embedding_dim)
    assert AnnConfig.from_settings(DEFAULTS) == AnnConfig(30.0, 250, 40_000)
    assert isinstance(DEFAULTS, CommonSettings)
    assert "secret" not in repr(StorageConfig.from_settings(DEFAULTS.model_copy(
        update={"s3_secret_key": DEFAULTS.s3_secret_key.__class__("secret")})))


def test_the_scanner_allows_a_claim_the_wait_for_prefetched_model_turns() -> None:
    """With PREFETCH 2 a claim may wait one other model turn: the scanner's hard limit is 2 x the
    largest unit's budget, with PREFETCH 1 once that."""
    s = WorkerSettings.model_construct(prefetch=2)
    one = WorkerSettings.model_construct(prefetch=1)
    assert thresholds(s).hard_limit.total_seconds() == 2 * thresholds(one).hard_limit.total_seconds()


def test_the_scanner_allows_prefetch_times_the_largest_units_budget() -> None:
    """PREFETCH x (TASK_BUDGET_BASE_S + max(SPLIT_MIN_CHUNKS - 1, PART_CHUNKS) x per chunk) (issue 31)."""
    s = WorkerSettings.model_construct(prefetch=2)
    assert thresholds(s).hard_limit.total_seconds() == 2 * (300 + 511 * 0.5)
    assert thresholds(s) == ScanThresholds()  # the policy's stated default is the settings' one
