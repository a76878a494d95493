"""The indexing worker (aio-pika consumer of ``rag.index.queue``)."""

#: ``app_id`` on every message this service publishes (shown in the RabbitMQ console).
APP_ID = "task_service"
