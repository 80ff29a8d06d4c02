"""The PostgreSQL store: several studio processes (servers, notebooks) on one database."""

from .store import (
    SCHEMA_VERSION,
    PostgresStore,
    SchemaError,
    StoreError,
    is_postgres_url,
    migrate,
    sqlalchemy_url,
)

__all__ = ["SCHEMA_VERSION", "PostgresStore", "SchemaError", "StoreError", "is_postgres_url", "migrate", "sqlalchemy_url"]
