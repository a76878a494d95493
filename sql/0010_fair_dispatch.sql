-- 0010: fair dispatch across users. At most K tasks of one user are "dispatched" (their message
-- released to the broker, or running); the others wait as WAITING/RETRYING with their outbox row
-- held (released_at IS NULL), and the relay releases held rows round-robin across users as slots
-- free up. index_task.dispatched_at marks a task that holds one of its user's K slots while it
-- is active (a terminal status frees the slot; a re-arm from a terminal status clears it).
ALTER TABLE outbox ADD COLUMN user_id BIGINT;
ALTER TABLE outbox ADD COLUMN released_at TIMESTAMPTZ;
UPDATE outbox o SET user_id = t.user_id FROM index_task t WHERE t.id = o.task_id;
UPDATE outbox SET released_at = create_time;  -- rows written before fair dispatch: released, as before

ALTER TABLE index_task ADD COLUMN dispatched_at TIMESTAMPTZ;
UPDATE index_task SET dispatched_at = update_time WHERE status IN ('WAITING', 'RETRYING', 'RUNNING');

-- held rows per user, oldest first (the relay's round-robin reads the first K of each user)
CREATE INDEX outbox_held_idx ON outbox (user_id, id) WHERE released_at IS NULL;
-- a user's dispatched active tasks (counted against K on every release)
CREATE INDEX index_task_user_dispatched_idx ON index_task (user_id)
    WHERE dispatched_at IS NOT NULL AND status IN ('WAITING', 'RETRYING', 'RUNNING');
