# PostgreSQL: the shared store backend (docs/postgres.md). The tests start a throwaway
# cluster from Debian's server binaries (tests/_pg.py: initdb/pg_ctl on a private unix socket,
# no TCP) and talk to it through psycopg 3, installed as personae's `postgres` extra.
apt_install postgresql
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "setup 60-postgresql: apt installed postgresql but no /usr/lib/postgresql/*/bin/initdb" >&2
  return 1 2>/dev/null || exit 1
fi
if ! pip_extras dev postgres; then
  echo "setup 60-postgresql: pip could not install the postgres extra (psycopg)" >&2
  return 1 2>/dev/null || exit 1
fi
