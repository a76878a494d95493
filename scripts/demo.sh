#!/usr/bin/env bash
# The main job, end to end: start the API and a worker (unless already running), create a user and
# a knowledge base, upload the sample document, wait until it is INDEXED, search, print the hits.
#   scripts/demo.sh        run the demo (services stay up afterwards)
#   scripts/demo.sh stop   stop the API and worker the demo started
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${VENV:-.venv}/bin/python
# shellcheck source=scripts/dotenv.sh
. scripts/dotenv.sh  # the environment wins over .env, as in services.sh and the services
if [[ -f .env ]]; then load_dotenv .env; fi
PORT=${KS_PORT:-8000}
URL="http://127.0.0.1:${PORT}"
RUN=${RAG_DATA_DIR:-.data}/run
mkdir -p "$RUN"

stop() {
  for n in api worker; do
    if [ -f "$RUN/$n.pid" ] && kill -0 "$(cat "$RUN/$n.pid")" 2>/dev/null; then
      kill "$(cat "$RUN/$n.pid")" && echo "stopped $n"
    fi
    rm -f "$RUN/$n.pid"
  done
}
if [ "${1:-}" = "stop" ]; then stop; exit 0; fi

start() {  # name module
  if [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; then
    echo "$1 already running (pid $(cat "$RUN/$1.pid"))"; return
  fi
  nohup setsid "$PY" -m "$2" >>"$RUN/$1.log" 2>&1 &
  echo $! >"$RUN/$1.pid"
  echo "started $1 (pid $!, log $RUN/$1.log)"
}
start api knowledge_service
start worker task_service

echo -n "waiting for the API on $URL "
for _ in $(seq 1 240); do
  if curl -fsS "$URL/readyz" >/dev/null 2>&1; then echo " ready"; break; fi
  if ! kill -0 "$(cat "$RUN/api.pid")" 2>/dev/null; then echo; echo "API exited; see $RUN/api.log"; tail -20 "$RUN/api.log"; exit 1; fi
  echo -n "."; sleep 0.5
done
curl -fsS "$URL/readyz" >/dev/null || { echo "API not ready; see $RUN/api.log"; exit 1; }

"$PY" - "$URL" <<'PYEOF'
import json, subprocess, sys, time
import httpx

url = sys.argv[1]
user = json.loads(subprocess.run([sys.executable, "-m", "rag_cli", "create-user",
                                  f"demo-{int(time.time())}"], check=True, capture_output=True, text=True).stdout)
h = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {user['token']}"}, timeout=60)
kb = h.post("/api/v1/knowledge-bases", json={"name": "demo"}).raise_for_status().json()
print(f"user {user['user_id']}, knowledge base {kb['kb_id']}")
with open("samples/indexing-primer.md", "rb") as f:
    up = h.post(f"/api/v1/knowledge-bases/{kb['kb_id']}/documents",
                files={"file": ("indexing-primer.md", f, "text/markdown")}).raise_for_status().json()
print(f"uploaded: HTTP 202 {up}")
t0 = time.monotonic()
while True:
    doc = h.get(f"/api/v1/documents/{up['document_id']}").raise_for_status().json()
    if doc["status"] in ("INDEXED", "FAILED"):
        break
    if time.monotonic() - t0 > 300:
        sys.exit(f"document still {doc['status']} after 300 s; see .data/run/worker.log")
    time.sleep(0.5)
print(f"document {doc['status']} in {time.monotonic() - t0:.1f} s: {doc['chunk_count']} chunks, "
      f"task {doc['task']['status']}, generation {doc['index_generation']}")
if doc["status"] != "INDEXED":
    sys.exit(f"indexing failed: {doc['task']['error_code']}: {doc['error_message']}")
q = "What stops a paused worker from overwriting newer chunks?"
res = h.post(f"/api/v1/knowledge-bases/{kb['kb_id']}/search", json={"query": q, "top_k": 3}).raise_for_status().json()
print(f"\nsearch: {q}")
for i, hit in enumerate(res["results"], 1):
    text = " ".join(hit["content"].split())
    print(f"  {i}. score {hit['score']:.3f}  {hit['filename']} #{hit['chunk_index']}: {text[:160]}...")
print(f"\nAdmin page: {url}/admin   (sign in with the token below; upload, watch progress, retry, search)")
print(f"API docs: {url}/docs   RabbitMQ console: http://127.0.0.1:15672 "
      "(RABBITMQ_DEFAULT_USER / RABBITMQ_DEFAULT_PASS from .env)")
print(f"token for curl: export TOKEN={user['token']}")
PYEOF
echo "API and worker keep running; stop them with: scripts/demo.sh stop"
