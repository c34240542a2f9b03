"""Fixtures of the integration tests: private servers that a test may stop."""

from .servers import private_postgres, private_redis

__all__ = ["private_postgres", "private_redis"]
