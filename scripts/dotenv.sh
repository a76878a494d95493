# shellcheck shell=bash
# Source a .env file (set -a), but like pydantic-settings let the environment win over the file:
# `S3_SECRET_KEY=x scripts/services.sh up` must use x even when .env defines another one.
load_dotenv() {
    local name kv saved=()
    while IFS= read -r name; do
        if [[ -n "${!name+x}" ]]; then saved+=("$name=${!name}"); fi
    done < <(sed -nE 's/^[[:space:]]*(export[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)=.*/\2/p' "$1")
    set -a
    # shellcheck disable=SC1090
    . "$1"
    set +a
    for kv in "${saved[@]}"; do export "${kv%%=*}=${kv#*=}"; done
}
