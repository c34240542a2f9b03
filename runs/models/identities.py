"""Who a person is at the single sign-on provider (docs/operating.md#single-sign-on).

An account made by single sign-on is linked to the provider's (issuer, subject): the
subject (`sub`) never changes for a person at a provider, where the username, an e-mail
address or a display name may. The link is what lets a renamed person keep their
account, and what stops a provider's user from taking over a local account that happens
to have the same username (runs/identities.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class SignInIdentity(models.Model):
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    # One identity per account: an account is never reached from two providers' people.
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_in_identity"
    )
    created_at = models.DateTimeField(db_default=Now())
    last_sign_in_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sign_in_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
