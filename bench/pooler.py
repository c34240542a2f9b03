"""A PgBouncer in transaction mode in front of the bench database, for `make bench`'s
rows through it (docs/operating.md, "PgBouncer"): Debian's pgbouncer, on a free port of
127.0.0.1, with a pool of as many server connections as the workers have processes,
so that the figure is the pooler's hop and the statements it cannot prepare, not a
queue for a connection."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

BINARY = "/usr/sbin/pgbouncer"


def available() -> str | None:
    """The pgbouncer binary, or None when it is not installed."""
    return shutil.which("pgbouncer") or (BINARY if os.path.exists(BINARY) else None)


class PgBouncer:
    def __init__(self, base: Path, server: dict[str, str], *, pool_size: int) -> None:
        """`server`: host, port, user, password (optional) and dbname of the database."""
        self.base, self.server, self.pool_size = base, server, pool_size
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self) -> str:
        """DATABASE_URL for a process that reaches the database through the pooler."""
        auth = quote(self.server["user"], safe="")
        if self.server.get("password"):
            auth += ":" + quote(self.server["password"], safe="")
        name = quote(self.server["dbname"], safe="")
        return f"postgres://{auth}@127.0.0.1:{self.port}/{name}?pooler=pgbouncer"

    def _user(self) -> list[str]:
        """PgBouncer refuses to run as root: as root, run as the owner of the server's
        socket directory (a Unix socket, the embedded server), else as nobody."""
        if os.geteuid() != 0:
            return []
        host = self.server["host"]
        owner = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
        return ["-u", owner if owner != "root" else "nobody"]

    def __enter__(self) -> PgBouncer:
        binary = available()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.base.mkdir(parents=True, exist_ok=True)
        server = self.server
        line = [f"host={server['host']}", f"port={server['port']}", f"user={server['user']}"]
        if server.get("password"):
            line.append(f"password={server['password']}")
        (self.base / "users.txt").write_text(f'"{server["user"]}" ""\n')
        ini = self.base / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"{server['dbname']} = {' '.join(line)} dbname={server['dbname']}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.base / 'users.txt'}\n"
            f"pool_mode = transaction\ndefault_pool_size = {self.pool_size}\n"
            "max_client_conn = 200\nignore_startup_parameters = extra_float_digits\n"
        )
        os.chmod(self.base, 0o755)
        with (self.base / "pgbouncer.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [binary, *self._user(), str(ini)],
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {(self.base / 'pgbouncer.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("pgbouncer did not listen within 30 s")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
