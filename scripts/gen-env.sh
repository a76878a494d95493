#!/usr/bin/env bash
# Write .env from .env.example with fresh random secrets, unless .env already exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .env ]; then echo ".env exists; keeping it"; exit 0; fi
rand() { python3 -c 'import secrets; print(secrets.token_urlsafe(24))'; }
access="rag$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
secret="$(rand)"
sed -e "s|^S3_ACCESS_KEY=.*|S3_ACCESS_KEY=${access}|" \
    -e "s|^S3_SECRET_KEY=.*|S3_SECRET_KEY=${secret}|" .env.example > .env
chmod 600 .env
echo "wrote .env with generated object-storage credentials"
