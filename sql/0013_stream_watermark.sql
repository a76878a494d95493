-- Issue 18: a KB event stream reads only the rows changed since its watermark
-- (knowledge_service/streams.py, shared/adapters/postgres/repo/streams.py):
--   document_info WHERE kb_id = $1 AND update_time > $2,  index_task WHERE kb_id = $1 AND update_time > $2
-- Without these, each poll scanned every document (and task) of the KB.
CREATE INDEX IF NOT EXISTS document_info_kb_update_idx ON document_info (kb_id, update_time);
CREATE INDEX IF NOT EXISTS index_task_kb_update_idx ON index_task (kb_id, update_time);
