"""PostgreSQL adapter: the pool, migrations, the repositories and the task store."""
