"""Fixtures of the integration tests: private servers that a test may stop, and private
PgBouncers in front of the test database."""

from .servers import private_postgres, private_redis, start_pgbouncer

__all__ = ["private_postgres", "private_redis", "start_pgbouncer"]
