#!/usr/bin/env bash
# A throw-away PostgreSQL for the tests, on loopback (make test uses it).
#   postgres.sh start DIR   initdb into DIR, start on a free port, print the URL
#   postgres.sh stop DIR    stop it and remove DIR
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
cmd=$1
dir=$2
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
  start)
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres webauthn
    echo "postgres://postgres@127.0.0.1:$port/webauthn"
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
esac
