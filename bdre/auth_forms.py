"""Log-in forms that refuse a locked-out user name or address before checking the password
(bdre/security.py): while locked, the right password is refused too, so guessing learns
nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from bdre import security
from bdre.admin_site import refuse_unless_superuser

if TYPE_CHECKING:
    # What the mixin is mixed into, so that self.cleaned_data and super().clean() are typed.
    _FormBase = AuthenticationForm
else:
    _FormBase = object


class LockoutMixin(_FormBase):
    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        ip = security.client_ip(self.request)
        wait = security.locked_for(security.LOGIN, username, ip)
        if wait:
            security.log.warning(
                "authentication refused: login user=%s ip=%s reason=locked out", username, ip
            )
            raise ValidationError(security.refusal(wait), code="locked")
        data = super().clean()
        if username:
            security.record_success(security.LOGIN, username)
        return data


class LoginForm(LockoutMixin, AuthenticationForm):
    pass


class AdminLoginForm(LockoutMixin, AdminAuthenticationForm):
    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        refuse_unless_superuser(user)
