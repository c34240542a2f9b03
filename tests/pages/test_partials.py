"""template_for (runs/pages/partials.py): the part of a page htmx asks for, by target."""

from __future__ import annotations

from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from runs.pages.partials import is_partial, template_for

PARTS = {"run-view": "run-view", "run-live": "live-update"}


def request(**headers: str):
    req = RequestFactory().get("/", headers=headers)
    req.htmx = HtmxDetails(req)
    return req


def test_the_whole_page_without_htmx_or_for_a_target_it_does_not_name():
    assert template_for(request(), "runs/detail.html", PARTS) == "runs/detail.html"
    # A target htmx names without HX-Request is not htmx's.
    assert template_for(request(HX_Target="run-live"), "runs/detail.html", PARTS) == (
        "runs/detail.html"
    )
    other = request(HX_Request="true", HX_Target="elsewhere")
    assert template_for(other, "runs/detail.html", PARTS) == "runs/detail.html"
    assert not is_partial(template_for(other, "runs/detail.html", PARTS))


def test_the_part_its_target_maps_to():
    live = request(HX_Request="true", HX_Target="run-live")
    assert template_for(live, "runs/detail.html", PARTS) == "runs/detail.html#live-update"
    assert is_partial(template_for(live, "runs/detail.html", PARTS))
    same = request(HX_Request="true", HX_Target="overview-live")
    assert template_for(same, "runs/overview.html", "overview-live") == (
        "runs/overview.html#overview-live"
    )
