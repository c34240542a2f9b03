"""The request a page's view is given, as the type checker should see it."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class SignedInRequest(HttpRequest):
    """A request to a page behind runs.pages.access' viewer_required or operator_required, which
    turn away anyone not signed in, after django-htmx's middleware: `user` is a user, never
    the anonymous one, and `htmx` tells whether htmx sent it.

    Only a type: Django builds the request, nothing makes one of these, and the bare
    annotations below add nothing to HttpRequest at run time."""

    user: User
    htmx: HtmxDetails
