from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    """Django's admin with our site (config/admin.py); imported while apps load, so
    nothing else here."""

    default_site = "config.admin.AdminSite"
