"""Fault injection (issue 23): the pieces a Jepsen-style suite is built of.

- `pg_proxy.PgProxy`: a TCP proxy in front of PostgreSQL that cuts
  connections and drops the reply to a COMMIT (an ambiguous commit);
- `conftest.py`: a Redis and a PostgreSQL of the test's own (`own_redis`,
  `own_postgres`, restartable), and a database URL through a proxy;
- `invariants.check`: what must hold in the database whatever happened;
- `tests/server_process.py`: `ServerProcess.freeze()` / `thaw()`.

`test_infrastructure.py` tests each of them.
"""
