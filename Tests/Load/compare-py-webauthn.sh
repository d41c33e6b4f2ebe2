#!/usr/bin/env bash
# Throughput of `webauthn serve` against a py_webauthn server (Tests/Load/py_webauthn_server.py)
# under the same load: `webauthn-dev loadtest` run against each, one after the other, on loopback.
#
#   Tests/Load/compare-py-webauthn.sh [DURATION]        (seconds of sign-ins per server, default 20)
#
# Environment:
#   LT_BIN             folder holding the release binaries webauthn and webauthn-dev (default /tmp/lt-bin)
#   ORDER              ours-first (default) or py-first
#   PY_WORKERS         uvicorn worker processes (default 2)
#   PY_WEBAUTHN_VENV   an existing venv with the pinned packages to reuse (kept); otherwise a venv is
#                      made in this run's temporary folder (and removed with it)
#
# Prints, per server: sign-ins/s, p50/p99 latency, failures and server CPU µs per sign-in, then the
# ratios ours/py. Server CPU is utime+stime of the server's whole process tree (for uvicorn: the
# master and its workers) from /proc, sampled when the load client prints "registered N users"
# (the start of its timed phase) and after it exits. For ours, the load client's own --server-pid
# figure is shown beside it as a cross-check. Exits non-zero if either server had a failure.
set -euo pipefail

DURATION=${1:-${DURATION:-20}}
LT_BIN=${LT_BIN:-/tmp/lt-bin}
ORDER=${ORDER:-ours-first}
PY_WORKERS=${PY_WORKERS:-2}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RP_ID=example.com
ORIGIN=https://example.com
USERS=64
CONCURRENCY=32
USERNAMELESS=0.5
PINS=(webauthn==2.8.0 starlette==1.10.0 "uvicorn[standard]==0.54.0" uvloop==0.23.0 httptools==0.9.0 cryptography==50.0.2 cbor2==5.9.0)

for tool in "$LT_BIN/webauthn" "$LT_BIN/webauthn-dev"; do
    [[ -x $tool ]] || { echo "missing $tool (set LT_BIN)" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 2; }

TMP=$(mktemp -d /tmp/compare-py-webauthn.XXXXXX)
PIDS=()

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do
        # The server (or load client) and, for uvicorn, its workers.
        local children
        children=$(ps -o pid= --ppid "$pid" 2>/dev/null || true)
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        for child in $children; do kill -KILL "$child" 2>/dev/null || true; done
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

forget() { # drops a stopped process from PIDS
    local keep=() pid
    for pid in "${PIDS[@]}"; do [[ $pid == "$1" ]] || keep+=("$pid"); done
    PIDS=("${keep[@]}")
}

stop() {
    local pid=$1 children
    children=$(ps -o pid= --ppid "$pid" 2>/dev/null || true)
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    for child in $children; do kill -KILL "$child" 2>/dev/null || true; done
    wait "$pid" 2>/dev/null || true
    forget "$pid"
}

free_port() { # below the ephemeral range, where servers started on port 0 (such as tests') never land
    python3 - <<'EOF'
import random, socket
for port in random.sample(range(20000, 30000), 200):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
EOF
}

# CPU seconds (utime+stime) and RSS bytes of a process and all its descendants.
tree_stat() {
    python3 - "$1" <<'EOF'
import os, sys
root = int(sys.argv[1])
ticks = os.sysconf("SC_CLK_TCK")
children, stats = {}, {}
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        with open(f"/proc/{entry}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    pid = int(entry)
    stats[pid] = (int(fields[11]) + int(fields[12]), int(fields[21]))  # utime+stime; rss pages
    children.setdefault(int(fields[1]), []).append(pid)
cpu = rss = 0
todo = [root]
while todo:
    pid = todo.pop()
    if pid in stats:
        cpu += stats[pid][0]
        rss += stats[pid][1]
    todo += children.get(pid, [])
print(f"{cpu / ticks:.2f} {rss * os.sysconf('SC_PAGE_SIZE')}")
EOF
}

wait_ready() { # PORT PID
    for _ in $(seq 200); do
        kill -0 "$2" 2>/dev/null || { echo "the server exited" >&2; return 1; }
        if curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -d '{}' "http://127.0.0.1:$1/assertion/options"; then
            # Still alive: it is this server that answered, not another one on a port it failed to bind.
            sleep 0.3
            kill -0 "$2" 2>/dev/null && return 0
            echo "the server exited" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "the server on port $1 did not answer" >&2
    return 1
}

# run_load NAME PORT SERVER_PID [--server-pid PID]: the load test, with the server tree's CPU over its timed phase.
run_load() {
    local name=$1 port=$2 server=$3
    shift 3
    local out="$TMP/$name.out" json="$TMP/$name.json"
    echo "== $name: loadtest against http://127.0.0.1:$port (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    # Line-buffered, so that "registered N users" is seen when the timed phase starts.
    stdbuf -oL "$LT_BIN/webauthn-dev" loadtest --url "http://127.0.0.1:$port" --rp-id "$RP_ID" --origin "$ORIGIN" \
        --users "$USERS" --duration "$DURATION" --concurrency "$CONCURRENCY" --usernameless "$USERNAMELESS" \
        --json "$json" "$@" >"$out" 2>&1 &
    local load=$!
    PIDS+=("$load")
    while ! grep -q '^registered ' "$out" 2>/dev/null; do
        kill -0 "$load" 2>/dev/null || break
        sleep 0.02
    done
    local before after status=0
    before=$(tree_stat "$server")
    wait "$load" || status=$?
    forget "$load"
    after=$(tree_stat "$server")
    sed 's/^/   /' "$out"
    if [[ $status -ne 0 || ! -s $json ]]; then
        echo "the load test against $name failed (exit $status); the server's log:" >&2
        tail -n 30 "$TMP/$name.log" >&2
        return 1
    fi
    echo "$before $after" >"$TMP/$name.cpu"
}

run_ours() {
    local port pid
    port=$(free_port)
    "$LT_BIN/webauthn" serve --port "$port" --rp-id "$RP_ID" --origin "$ORIGIN" --db "sqlite:$TMP/ours.sqlite" \
        --rate-limit off --log-level warning >"$TMP/ours.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_ready "$port" "$pid"
    run_load ours "$port" "$pid" --server-pid "$pid"
    stop "$pid"
}

run_py() {
    local port pid
    port=$(free_port)
    # The schema made once, before the workers start (as a deployment would migrate first).
    (cd "$HERE" && WEBAUTHN_RP_ID=$RP_ID WEBAUTHN_ORIGIN=$ORIGIN WEBAUTHN_DB="$TMP/py.sqlite" \
        "$VENV/bin/python" -c 'import py_webauthn_server as s; s.get_store()')
    WEBAUTHN_RP_ID=$RP_ID WEBAUTHN_ORIGIN=$ORIGIN WEBAUTHN_DB="$TMP/py.sqlite" \
        "$VENV/bin/uvicorn" --app-dir "$HERE" py_webauthn_server:app --host 127.0.0.1 --port "$port" \
        --workers "$PY_WORKERS" --no-access-log --log-level warning >"$TMP/py.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_ready "$port" "$pid"
    # The workers up (each opens its connection at startup) before the load starts.
    for _ in $(seq 100); do
        [[ $(ps -o pid= --ppid "$pid" | wc -l) -ge $PY_WORKERS ]] && break
        sleep 0.1
    done
    sleep 1
    run_load py "$port" "$pid"
    stop "$pid"
}

# The py_webauthn environment.
if [[ -n ${PY_WEBAUTHN_VENV:-} && -x $PY_WEBAUTHN_VENV/bin/uvicorn ]]; then
    VENV=$PY_WEBAUTHN_VENV
else
    VENV="$TMP/venv"
    echo "== making a venv in $VENV: ${PINS[*]}"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PINS[@]}"
fi
VERSIONS=$("$VENV/bin/python" - <<'EOF'
import sys
from importlib.metadata import version
print(f"Python {sys.version.split()[0]}; " + ", ".join(f"{p} {version(p)}" for p in ("webauthn", "starlette", "uvicorn", "uvloop", "httptools", "cryptography", "cbor2")))
EOF
)
echo "== py server: $VERSIONS; SQLite $("$VENV/bin/python" -c 'import sqlite3; print(sqlite3.sqlite_version)')"
echo "== $(nproc) CPUs; $DURATION s of sign-ins per server; $USERS users, $CONCURRENCY browsers, ${USERNAMELESS} usernameless"

case $ORDER in
ours-first) run_ours; run_py ;;
py-first) run_py; run_ours ;;
*) echo "ORDER must be ours-first or py-first" >&2; exit 2 ;;
esac

python3 - "$TMP" "$PY_WORKERS" <<'EOF'
import json, sys
tmp, workers = sys.argv[1], sys.argv[2]
rows = {}
for name in ("ours", "py"):
    report = json.load(open(f"{tmp}/{name}.json"))
    cpu0, rss0, cpu1, rss1 = (float(x) for x in open(f"{tmp}/{name}.cpu").read().split())
    n = max(report["signIns"], 1)
    rows[name] = dict(
        rate=report["signInsPerSecond"], p50=report["latencyMs"]["p50"], p99=report["latencyMs"]["p99"],
        failures=report["failures"], cpu=(cpu1 - cpu0) * 1e6 / n, rss=rss1 / 1048576,
        own=report.get("server", {}).get("cpuMicrosecondsPerSignIn"), client=report.get("client", {}).get("cpuMicrosecondsPerSignIn"),
        signins=report["signIns"], first=report["firstFailures"],
    )
print()
print(f"{'server':<34} {'sign-ins/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'failures':>8} {'CPU µs/sign-in':>15} {'RSS MiB':>8}")
labels = {"ours": "ours (webauthn serve, SQLite)", "py": f"py_webauthn (uvicorn {workers} worker{'s' if workers != '1' else ''})"}
for name, r in rows.items():
    print(f"{labels[name]:<34} {r['rate']:>10.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} {r['failures']:>8d} {r['cpu']:>15.0f} {r['rss']:>8.1f}")
if rows["ours"]["own"] is not None:
    print(f"(ours, as the load client measured it with --server-pid: {rows['ours']['own']:.0f} µs CPU per sign-in)")
print(f"(load client CPU per sign-in: ours {rows['ours']['client']:.0f} µs, py {rows['py']['client']:.0f} µs)")
print()
print(f"throughput ours/py: {rows['ours']['rate'] / rows['py']['rate']:.2f}")
print(f"server CPU per sign-in ours/py: {rows['ours']['cpu'] / rows['py']['cpu']:.2f}")
for name, r in rows.items():
    for failure in r["first"]:
        print(f"{name} failure: {failure}")
sys.exit(1 if any(r["failures"] for r in rows.values()) else 0)
EOF
