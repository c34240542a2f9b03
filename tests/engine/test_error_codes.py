"""Every refusal has a stable code of its own (runs/errors.py), and the API answers each
by its code."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from django.conf import settings

from api import errors as api_errors
from reconciliation import services
from runs import engine, errors
from runs.errors import ClaimBusy, EngineError
from tests.support.api import token_client


def _refusals() -> list[type[EngineError]]:
    found = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.EngineError)
    ]
    return [*found, services.ClaimTakenByOther, services.ClaimSetAside]


def test_every_refusal_has_a_code_of_its_own():
    codes = {}
    for cls in _refusals():
        assert "code" in vars(cls), f"{cls.__name__} has no code of its own"
        assert cls.code not in codes, f"{cls.__name__} and {codes[cls.code]} share {cls.code}"
        codes[cls.code] = cls.__name__
    assert len(codes) == len(_refusals()) >= 25


def test_refusals_come_from_runs_errors_and_never_through_the_door():
    """Importers take a refusal from runs.errors (docs/architecture.md#refusals): the
    engine's door is its verbs and their results, and hands on no refusal."""
    for cls in _refusals():
        if cls not in (services.ClaimTakenByOther, services.ClaimSetAside):
            assert cls.__name__ not in engine.__all__
            assert not hasattr(engine, cls.__name__), f"runs.engine still has {cls.__name__}"


def test_the_api_answers_every_refusal_by_its_class():
    """Every refusal of the catalogue has a row of its own in the API's map (a new one
    fails here until someone decides its answer), and the map holds nothing else."""
    assert set(api_errors.ANSWERS) == set(_refusals())
    for cls, (status, code, _) in api_errors.ANSWERS.items():
        assert code in api_errors.CODES and 400 <= status < 500, cls


def test_every_code_of_the_map_is_in_the_schema_enum_and_the_docs(operator):
    """A client reads the codes from the OpenAPI enum and from docs/api.md's list: each
    code the map can answer is in both."""
    openapi = token_client(operator).get("/api/schema/").json()
    enum = set(openapi["components"]["schemas"]["ErrorCodeEnum"]["enum"])
    page = (Path(settings.BASE_DIR) / "docs" / "api.md").read_text()
    section = page.split("## Pagination and errors", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", section.split("Codes:", 1)[1]))
    for _, code, _ in api_errors.ANSWERS.values():
        assert code in enum, code
        assert code in documented, code


def test_a_subclass_outside_the_catalogue_answers_as_what_it_refines():
    class Narrower(errors.ClaimNotFound):
        pass

    answer = api_errors.from_domain(Narrower("no claim 7"))
    assert answer is not None
    assert (answer.status_code, answer.code) == (404, api_errors.NOT_FOUND)


def test_a_refusal_without_an_answer_of_its_own_is_a_409_refused():
    answer = api_errors.from_domain(ClaimBusy("claim k is held"))
    assert answer is not None
    assert (answer.status_code, answer.code) == (409, api_errors.REFUSED)
    assert api_errors.from_domain(ValueError("not ours")) is None
