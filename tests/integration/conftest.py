"""Fixtures of the integration tests: private servers that a test may stop, and private
PgBouncers in front of the test database."""

from .servers import private_broker, private_postgres, start_pgbouncer

__all__ = ["private_broker", "private_postgres", "start_pgbouncer"]
