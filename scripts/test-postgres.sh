#!/usr/bin/env bash
# Start a private PostgreSQL server for the test suite and print its URL on stdout.
#
# Uses the Debian package's binaries (installed with apt-get when missing and we are root),
# a throw-away cluster under .state/pg-test on a free loopback port, trust auth on loopback.
# Idempotent: a cluster already running there is reused. Stop it with `scripts/test-postgres.sh stop`
# (`make test` does, when its tests end). COURT_TEST_PG_DIR names another folder for the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${COURT_TEST_PG_DIR:-$PWD/.state/pg-test}"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  else
    echo "PostgreSQL server binaries not found: apt-get install postgresql (Debian) and retry" >&2
    exit 1
  fi
fi
# initdb refuses to run as root: run the server as the 'postgres' user (created by the package) when root.
# That user must reach the cluster's directory: when the checkout sits under a directory it cannot
# enter (a private mktemp -d, a home directory), keep the cluster in /tmp instead, named after the checkout.
RUN=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir "$DIR" postgres
  RUN=(runuser -u postgres --)
  mkdir -p "$DIR" && chown postgres "$DIR"
  if ! runuser -u postgres -- test -w "$DIR"; then
    DIR="/tmp/court-pg-test-$(printf %s "$DIR" | sha1sum | cut -c1-12)"
  fi
fi
mkdir -p "$DIR"
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
cd "$DIR"  # a directory the server user may enter
if [ "${1:-}" = stop ]; then
  [ -f "$DIR/data/postmaster.pid" ] && "${RUN[@]}" "$PGBIN/pg_ctl" -D "$DIR/data" -m fast stop >&2 || true
  rm -rf "$DIR/data" "$DIR/port" "$DIR/server.log"  # a throw-away cluster: nothing is left to reuse
  exit 0
fi
if [ -f "$DIR/port" ] && "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$(cat "$DIR/port")"; then
  echo "postgresql://postgres@127.0.0.1:$(cat "$DIR/port")/postgres"
  exit 0
fi
rm -rf "$DIR/data"
"${RUN[@]}" "$PGBIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "$PORT" > "$DIR/port"
"${RUN[@]}" "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
  -o "-h 127.0.0.1 -p $PORT -k $DIR -c fsync=off -c max_connections=300" start >&2
echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
