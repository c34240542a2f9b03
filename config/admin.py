"""The admin site, for staff (operators manage retention policies and schedules there).

Django's admin sends anyone it refuses to its login page; ours sends a signed-in user
straight back (there is nothing to log in to), so a signed-in user who is not staff
went round in circles. They get a page saying why instead, and someone not signed in
goes to the product's login page, once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import update_wrapper
from typing import Any, TypeVar, cast

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.views.generic import RedirectView


def refused(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/admin_refused.html", status=403)


View = TypeVar("View", bound=Callable[..., Any])


class AdminSite(admin.AdminSite):
    # The product's name, where Django's admin says "Django administration"; the link
    # back to the dashboard is templates/admin/base_site.html's.
    site_header = "durable-runs administration"
    site_title = "durable-runs admin"
    index_title = "Retention policies and schedules"
    site_url = "/"

    def admin_view(self, view: View, cacheable: bool = False) -> View:
        inner = super().admin_view(view, cacheable)

        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            if not self.has_permission(request):
                if request.user.is_authenticated:
                    return refused(request)
                return redirect_to_login(request.get_full_path())
            return inner(request, *args, **kwargs)

        return cast(View, update_wrapper(guarded, inner))


_to_product_login = RedirectView.as_view(url="/login/", query_string=True)


def login(request: HttpRequest) -> HttpResponseBase:
    """/admin/login/: the product's login page, or why not for a signed-in non-staff."""
    if request.user.is_authenticated and not admin.site.has_permission(request):
        return refused(request)
    return _to_product_login(request)
