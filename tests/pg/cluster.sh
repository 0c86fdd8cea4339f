#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests: Debian's binaries, a fresh
# cluster in DIR (made and owned by the `postgres` user), listening on
# 127.0.0.1:PORT only, trust auth for the user `toolhost`, fsync off.
#
#   cluster.sh start DIR PORT   prints the URL (postgres://toolhost@127.0.0.1:PORT/postgres);
#                               a cluster already in DIR is started again as it was
#   cluster.sh stop DIR         a fast shutdown (the tests remove DIR)
#
# With DIR/tls/server.crt (tests/pg/certs.sh DIR), the server takes TLS.
set -euo pipefail
cmd=$1 dir=$2
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as_postgres() { runuser -u postgres -- "$@"; }
case $cmd in
start)
    port=$3
    chown postgres: "$dir"
    [ -d "$dir/data" ] ||
        as_postgres "$bin/initdb" -U toolhost --auth=trust -E UTF8 -D "$dir/data" >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    tls=""
    [ -f "$dir/tls/server.crt" ] &&
        tls="-c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key"
    as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-p $port -c listen_addresses=127.0.0.1 -c fsync=off -k $dir $tls" start >/dev/null ||
        { cat "$dir/server.log" >&2; exit 1; }
    echo "postgres://toolhost@127.0.0.1:$port/postgres"
    ;;
stop)
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
esac
