"""setup() on a migrated schema needs no DDL rights (probeprod).

It always ran ``CREATE SCHEMA IF NOT EXISTS``, which Postgres refuses to a role
without CREATE on the database even when the schema exists, so an app role with
USAGE + DML (as docs/postgres.md recommends) could not call setup() at start.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.postgres.conftest import schema_at
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.schema import MIGRATIONS
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres


@pytest.fixture
def app_role(pg_url: str, fresh_schema: str) -> Iterator[str]:
    """A login role with USAGE on ``fresh_schema`` and DML on its tables only
    (after setup() ran there as the admin); the role's URL."""
    role = f"tl_app_{uuid.uuid4().hex[:10]}"
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f'GRANT USAGE ON SCHEMA "{fresh_schema}" TO {role}')
        admin.execute(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{fresh_schema}" TO {role}'
        )
    info = psycopg.conninfo.conninfo_to_dict(pg_url)
    info["user"] = role
    try:
        yield psycopg.conninfo.make_conninfo(**info)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{fresh_schema}" CASCADE')
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def put_one(saver: PostgresSaver) -> None:
    cp = empty_checkpoint()
    saver.put({"configurable": {"thread_id": "lp", "checkpoint_ns": ""}}, cp, {"step": 0}, {})


def test_setup_on_a_migrated_schema_with_dml_rights_only(app_role: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(app_role, schema=fresh_schema, pool=True) as saver:
        saver.setup()
        saver.setup()
        put_one(saver)
        assert saver.get_tuple({"configurable": {"thread_id": "lp"}}) is not None


def test_setup_on_a_missing_schema_still_needs_create(app_role: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(app_role, schema=fresh_schema + "_x") as saver:
        with pytest.raises(StorageError, match="permission denied"):
            saver.setup()


def test_setup_in_a_read_only_transaction_on_a_migrated_schema(
    pg_url: str, fresh_schema: str
) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(
        pg_url, autocommit=True, options="-c default_transaction_read_only=on"
    ) as conn:
        PostgresSaver(conn, schema=fresh_schema).setup()


def test_setup_on_an_older_schema_by_a_dml_role_says_who_must_migrate(
    pg_url: str, fresh_schema: str
) -> None:
    """A schema needing migrations is refused up front with what to do, not with
    the server's "must be owner of table ..." from the middle of one (reviewpg)."""
    latest = len(MIGRATIONS) - 1
    schema_at(pg_url, fresh_schema, latest)  # one migration behind
    role = f"tl_app_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f'GRANT USAGE, CREATE ON SCHEMA "{fresh_schema}" TO {role}')
        admin.execute(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{fresh_schema}" TO {role}'
        )
        owner = admin.execute("SELECT current_user").fetchone()[0]
    info = psycopg.conninfo.conninfo_to_dict(pg_url)
    info["user"] = role
    try:
        with PostgresSaver.from_conn_string(
            psycopg.conninfo.make_conninfo(**info), schema=fresh_schema
        ) as saver:
            with pytest.raises(StorageError) as caught:
                saver.setup()
            msg = str(caught.value)
            assert f"needs migration {latest - 1} -> {latest}" in msg
            assert f"role {role!r}" in msg and repr(owner) in msg and "checkpoint_blobs" in msg
            assert "run saver.setup() once" in msg
            # Postgres has no grantable right to ALTER a table (reviewttl)
            assert "a member of the owning role, or a superuser" in msg
            assert "DDL rights" not in msg
            with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as own:
                own.setup()  # the owner migrates
            saver.setup()  # then the app role's setup finds nothing to do
            put_one(saver)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{fresh_schema}" CASCADE')
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")
