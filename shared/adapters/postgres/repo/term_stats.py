"""Repository of the keyword statistics per knowledge base (sql/0018): the fold of pending deltas
and the reads of a KB's document frequencies.

``kb_term`` holds folded counts, ``kb_term_delta`` what triggers appended since; a frequency is
always their sum (:data:`KB_DF_SQL`), so folding changes no score.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from shared.domain.records import TermFold

_FOLD_LOCK_KEY = 0x4B425446  # "KBTF": one fold at a time across workers

#: ``(term, df)`` of KB ``$1`` for the terms ``$2`` (text[]): folded count + pending deltas, one
#: snapshot. The term ``''`` is the KB's chunk count. Terms no chunk of the KB holds are absent.
KB_DF_SQL = (
    "SELECT term, sum(df)::bigint AS df FROM ("
    " SELECT term, df FROM kb_term WHERE kb_id = $1 AND term = ANY($2::text[])"
    " UNION ALL SELECT term, d FROM kb_term_delta WHERE kb_id = $1 AND term = ANY($2::text[])"
    ") s GROUP BY term HAVING sum(df) > 0"
)

# Move up to $1 deltas (oldest first) into kb_term; answers the deltas moved and the keys left at 0.
_FOLD = """
WITH moved AS (
    DELETE FROM kb_term_delta WHERE id IN (SELECT id FROM kb_term_delta ORDER BY id LIMIT $1)
    RETURNING kb_id, term, d
), summed AS (
    SELECT kb_id, term, sum(d)::bigint AS d FROM moved GROUP BY 1, 2 HAVING sum(d) <> 0
), upserted AS (
    INSERT INTO kb_term AS k (kb_id, term, df) SELECT kb_id, term, d FROM summed
    ON CONFLICT (kb_id, term) DO UPDATE SET df = k.df + EXCLUDED.df
    RETURNING k.kb_id, k.term, k.df
)
SELECT (SELECT count(*) FROM moved) AS moved,
       (SELECT array_agg(kb_id) FROM upserted WHERE df <= 0) AS zero_kbs,
       (SELECT array_agg(term) FROM upserted WHERE df <= 0) AS zero_terms
"""


async def fold(conn: asyncpg.Connection, batch: int) -> TermFold | None:
    """Fold up to ``batch`` pending deltas into ``kb_term`` in ONE transaction (readers see the
    deltas or their sum, never both or neither); None when another fold was running. Raises
    ValueError if ``batch`` < 1."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    async with conn.transaction():
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _FOLD_LOCK_KEY):
            return None
        r = await conn.fetchrow(_FOLD, batch)
        kbs, terms = r["zero_kbs"] or [], r["zero_terms"] or []
        if kbs:
            await conn.execute(
                "DELETE FROM kb_term k USING unnest($1::bigint[], $2::text[]) AS z(kb_id, term)"
                " WHERE k.kb_id = z.kb_id AND k.term = z.term AND k.df <= 0", kbs, terms,
            )
    return TermFold(int(r["moved"]), len(kbs))


async def pending(conn: asyncpg.Connection) -> int:
    """Deltas not yet folded (every KB)."""
    return int(await conn.fetchval("SELECT count(*) FROM kb_term_delta"))


async def kb_document_frequencies(conn: asyncpg.Connection, kb_id: int, terms: Sequence[str]) -> dict[str, int]:
    """``{term: chunks of the KB holding it}`` for ``terms`` (lexemes as ``content_tsv`` holds
    them; ``''``: the KB's chunk count), exact whether folded or not; absent terms: 0 chunks."""
    rows = await conn.fetch(KB_DF_SQL, kb_id, list(terms))
    return {r["term"]: int(r["df"]) for r in rows}
