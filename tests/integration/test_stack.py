"""scripts/stack.py, the supervisor behind `make up` / `make bench`: its development
SECRET_KEY, and (marked `workers`) a real stack whose worker is killed.

Every stack here runs with DURABLE_RUNS_VAR pointing at a temporary directory, so a
developer's var/ (operator login, secret key, services.env) is never touched."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "scripts" / "stack.py"


def load_stack() -> ModuleType:
    """scripts/ is not a package; stack.py imports nothing from Django, so load it as is."""
    spec = importlib.util.spec_from_file_location("stack", STACK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stack"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def stack_env(var: Path, **extra: str) -> dict[str, str]:
    """This session's environment (DATABASE_URL / CELERY_BROKER_URL included, so no
    embedded server starts) minus its SECRET_KEY, with the var dir moved to `var`."""
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    env.update(DURABLE_RUNS_VAR=str(var), **extra)
    return env


def test_stack_secret_key_is_generated_private_and_reused(tmp_path):
    stack = load_stack()

    key = stack._secret_key(tmp_path)

    path = tmp_path / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == key + "\n"
    assert len(key) >= 50
    assert stack._secret_key(tmp_path) == key


def test_stack_run_gives_its_command_a_secret_key(tmp_path):
    """`make bench` is `stack.py run ...`: Django must start there with no SECRET_KEY set."""
    show_key = "import django; django.setup(); from django.conf import settings; "
    show_key += "print(settings.SECRET_KEY)"

    result = subprocess.run(
        [sys.executable, str(STACK), "run", sys.executable, "-c", show_key],
        cwd=ROOT,
        env=stack_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == (tmp_path / "bench" / "secret_key").read_text()


def test_stack_env_exports_the_development_secret_key(tmp_path):
    result = subprocess.run(
        [sys.executable, str(STACK), "env"],
        cwd=ROOT,
        env=stack_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    key = (tmp_path / "secret_key").read_text().strip()
    assert f"export SECRET_KEY={key}" in result.stdout.splitlines()
