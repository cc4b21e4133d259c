"""The API tokens page: the user's own tokens, with when each was created, expires and was
last used; creating one shows its key once; revoking asks first."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from bdre import security
from bdre.access import signed_in
from bdre.models import ApiToken


class NewTokenForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="What it is for")
    days = forms.IntegerField(min_value=1, required=False, help_text="Valid for (days)")

    def clean_days(self) -> int:
        days = self.cleaned_data["days"] or settings.BDRE_TOKEN_DAYS
        if days > settings.BDRE_TOKEN_DAYS:
            raise forms.ValidationError(f"A token lasts at most {settings.BDRE_TOKEN_DAYS} days.")
        return days


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    form = NewTokenForm(initial={"days": settings.BDRE_TOKEN_DAYS})
    new_key = None
    if request.method == "POST":
        form = NewTokenForm(request.POST)
        if form.is_valid():
            _, new_key = ApiToken.issue(
                request.user, form.cleaned_data["name"], form.cleaned_data["days"]
            )
            form = NewTokenForm(initial={"days": settings.BDRE_TOKEN_DAYS})
    # The key is rendered into this answer only, never into a redirect or a message: those
    # travel through the session or a cookie.
    response = render(
        request,
        "bdre/tokens.html",
        {
            "tokens": ApiToken.objects.filter(user=signed_in(request.user)),
            "form": form,
            "new_key": new_key,
            "max_days": settings.BDRE_TOKEN_DAYS,
        },
    )
    if new_key:
        response["Cache-Control"] = "no-store"
    return response


@login_required
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the confirmation page; POST: the revocation."""
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if request.method == "POST":
        security.log.info(
            "token %s of user=%s revoked by its owner", token.pk, request.user.get_username()
        )
        token.delete()
        messages.success(request, f"Token {token.name or token.pk} is revoked.")
        return redirect("ui-tokens")
    return render(request, "bdre/token_revoke.html", {"token": token})
