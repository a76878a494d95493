#!/usr/bin/env bash
# Write .env from .env.example with fresh random secrets, unless .env already exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .env ]; then echo ".env exists; keeping it"; exit 0; fi
hex() { python3 -c "import secrets; print(secrets.token_hex($1))"; }
access="rag$(hex 8)"
secret="$(hex 20)"
mq_user="rag$(hex 4)"
mq_pass="$(hex 20)"
redis_pass="$(hex 20)"
sed -e "s|^S3_ACCESS_KEY=.*|S3_ACCESS_KEY=${access}|" \
    -e "s|^S3_SECRET_KEY=.*|S3_SECRET_KEY=${secret}|" \
    -e "s|^MINIO_ROOT_USER=.*|MINIO_ROOT_USER=${access}|" \
    -e "s|^MINIO_ROOT_PASSWORD=.*|MINIO_ROOT_PASSWORD=${secret}|" \
    -e "s|^POSTGRES_PASSWORD=.*|POSTGRES_PASSWORD=$(hex 20)|" \
    -e "s|^RABBITMQ_DEFAULT_USER=.*|RABBITMQ_DEFAULT_USER=${mq_user}|" \
    -e "s|^RABBITMQ_DEFAULT_PASS=.*|RABBITMQ_DEFAULT_PASS=${mq_pass}|" \
    -e "s|^AMQP_URL=.*|AMQP_URL=amqp://${mq_user}:${mq_pass}@127.0.0.1:5672/|" \
    -e "s|^REDIS_PASSWORD=.*|REDIS_PASSWORD=${redis_pass}|" \
    -e "s|^REDIS_URL=redis://127.0.0.1|REDIS_URL=redis://:${redis_pass}@127.0.0.1|" \
    .env.example > .env
chmod 600 .env
echo "wrote .env with generated credentials (object storage, and compose's database/broker/redis passwords)"
