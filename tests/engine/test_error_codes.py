"""Every refusal has a stable code of its own (runs/errors.py), and the API answers each
by its code."""

from __future__ import annotations

import inspect

from api import errors as api_errors
from reconciliation import services
from runs import engine, errors
from runs.errors import ClaimBusy, EngineError


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


def test_the_api_maps_known_codes_only():
    known = {cls.code for cls in _refusals()}
    assert set(api_errors._BY_DOMAIN_CODE) <= known
    for status, code, _ in api_errors._BY_DOMAIN_CODE.values():
        assert code in api_errors.CODES and 400 <= status < 500


def test_a_refusal_without_an_answer_of_its_own_is_a_409_refused():
    answer = api_errors.from_domain(ClaimBusy("claim k is held"))
    assert answer is not None
    assert (answer.status_code, answer.code) == (409, api_errors.REFUSED)
    assert api_errors.from_domain(ValueError("not ours")) is None
