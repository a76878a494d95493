"""Adapters: the I/O edges (PostgreSQL, RabbitMQ, Redis, S3-compatible storage, embedding models)."""
