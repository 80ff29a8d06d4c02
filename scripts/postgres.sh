#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests and the benchmarks: nothing of the machine's own
# PostgreSQL (no service, no port) is used or changed.
#
#   scripts/postgres.sh install      Debian's `postgresql` package, only when its binaries are missing
#   scripts/postgres.sh start DIR    initdb into DIR (an empty folder) and start the server on a Unix
#                                    socket in DIR/sock (no TCP); prints the admin URL
#   scripts/postgres.sh stop DIR     stop it (DIR can then be removed)
#
# As root (CI) the cluster runs as the unprivileged `postgres` system user (created when missing):
# PostgreSQL refuses to run as root. STUDIO_PG_DURABLE=1 keeps fsync on (benchmarks); the tests turn it
# off, since they kill server processes, never PostgreSQL itself.
set -euo pipefail

bindir() {
  local dir=""
  if command -v pg_config >/dev/null 2>&1; then
    dir="$(pg_config --bindir)"
  fi
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
    echo "$dir"
  elif [ -x /usr/lib/postgresql/15/bin/initdb ]; then
    echo /usr/lib/postgresql/15/bin
  fi
}

as_owner() {  # run a PostgreSQL binary as the cluster's owner
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

cmd="${1:-}"
case "$cmd" in
  install)
    if [ -n "$(bindir)" ]; then
      exit 0
    fi
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
      SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    echo "postgres: installing Debian postgresql (apt-get)" >&2
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq postgresql >/dev/null
    if [ -z "$(bindir)" ]; then
      echo "postgres: initdb still missing after apt-get install" >&2
      exit 1
    fi
    ;;
  start)
    dir="${2:?usage: postgres.sh start DIR}"
    bin="$(bindir)"
    if [ -z "$bin" ]; then
      echo "postgres: no PostgreSQL binaries; run: bash scripts/postgres.sh install" >&2
      exit 1
    fi
    mkdir -p "$dir/sock"
    if [ "$(id -u)" -eq 0 ]; then
      if ! id postgres >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin postgres
      fi
      chown -R postgres "$dir"
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U studio -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    opts="-k $dir/sock -c listen_addresses= -c max_connections=300 -c shared_buffers=64MB"
    if [ "${STUDIO_PG_DURABLE:-0}" != "1" ]; then
      opts="$opts -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$opts" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql://studio@/postgres?host=$dir/sock"
    ;;
  stop)
    dir="${2:?usage: postgres.sh stop DIR}"
    bin="$(bindir)"
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    fi
    ;;
  *)
    echo "usage: $0 install | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
