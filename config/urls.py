from django.contrib import admin
from django.urls import include, path

from config import admin as admin_site
from config import health
from runs.web import sso
from runs.web.accounts import LoginView, LogoutView

# An unexpected exception: JSON in the API's error shape under /api/, Django's page
# elsewhere (api/errors.py).
handler500 = "api.errors.server_error"

urlpatterns = [
    # Operations: no login (health for probes; metrics by token or network).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    # One login page for the whole product: the admin's sends people to ours.
    path("admin/login/", admin_site.login),
    path("admin/", admin.site.urls),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    # Single sign-on (404 while OIDC_ISSUER is unset); the callback's name is the one
    # mozilla-django-oidc reverses for the redirect_uri it sends.
    path("oidc/authenticate/", sso.AuthenticateView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso.CallbackView.as_view(), name="oidc_authentication_callback"),
    path("reconciliation/", include("reconciliation.urls")),
    path("api/", include("api.urls")),
    path("", include("runs.web.urls")),
]
