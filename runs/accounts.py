"""Login and logout on the product's own pages (not the admin's). Failed logins are
throttled by django-axes (settings.AXES_*); its lockout page says for how long."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    pass


def locked_out(
    request: HttpRequest, credentials: Any = None, *args: Any, **kwargs: Any
) -> HttpResponse:
    return render(
        request,
        "accounts/locked_out.html",
        {
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "cooloff_minutes": round(float(settings.AXES_COOLOFF_TIME) * 60),
        },
        status=429,
    )
