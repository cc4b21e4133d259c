"""REST: the user's own API tokens (list, create, revoke), and a token for a user name and
password (``POST /api/v1/auth/token/``)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bdre import security
from bdre.access import signed_in
from bdre.ids import ID_REGEX
from bdre.models import ApiToken
from bdre.parsers import FormParser, JSONParser, MultiPartParser
from bdre.throttles import TokenIssueThrottle


class ApiTokenSerializer(serializers.ModelSerializer):
    """A token as its owner sees it later: never its key."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    expires_in_days = serializers.IntegerField(
        write_only=True,
        required=False,
        min_value=1,
        help_text="At most BDRE_TOKEN_DAYS (the default).",
    )
    expired = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields: tuple[str, ...] = (
            "id",
            "name",
            "created_ts",
            "expires_at",
            "last_used_at",
            "expired",
            "expires_in_days",
        )
        read_only_fields = ("created_ts", "expires_at", "last_used_at")

    def validate_expires_in_days(self, days: int) -> int:
        if days > settings.BDRE_TOKEN_DAYS:
            raise serializers.ValidationError(
                f"A token lasts at most {settings.BDRE_TOKEN_DAYS} days."
            )
        return days


class NewApiTokenSerializer(ApiTokenSerializer):
    key = serializers.CharField(read_only=True, help_text="Shown this once; keep it safe.")

    class Meta(ApiTokenSerializer.Meta):
        fields = (*ApiTokenSerializer.Meta.fields, "key")


class ApiTokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """The user's own API tokens. Creating one answers its key, the only time it is shown;
    deleting one revokes it at once."""

    lookup_value_regex = ID_REGEX
    serializer_class = ApiTokenSerializer
    ordering_fields = ("id", "created_ts", "expires_at")

    def get_queryset(self):
        return ApiToken.objects.filter(user=signed_in(self.request.user)).order_by(
            "-created_ts", "-id"
        )

    @extend_schema(request=ApiTokenSerializer, responses={201: NewApiTokenSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = ApiTokenSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, key = ApiToken.issue(request.user, data["name"], data.get("expires_in_days"))
        token.key = key
        return Response(NewApiTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        security.log.info(
            "token %s of user=%s revoked by its owner", instance.pk, instance.user.get_username()
        )
        instance.delete()


class IssueToken(APIView):
    """A new API token for a user name and password, lasting BDRE_TOKEN_DAYS. Throttled by
    address, and refused while the user name or the address is locked out."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [TokenIssueThrottle]
    parser_classes = [FormParser, MultiPartParser, JSONParser]
    serializer_class = AuthTokenSerializer

    @extend_schema(
        request=AuthTokenSerializer,
        responses={
            200: inline_serializer(
                "IssuedToken",
                {"token": serializers.CharField(), "expires_at": serializers.DateTimeField()},
            )
        },
    )
    def post(self, request: Request) -> Response:
        username = request.data.get("username") if hasattr(request.data, "get") else None
        username = username if isinstance(username, str) else None
        ip = security.client_ip(request)
        wait = security.locked_for(security.LOGIN, username, ip)
        if wait:
            security.log.warning(
                "authentication refused: login user=%s ip=%s reason=locked out", username, ip
            )
            raise exceptions.Throttled(wait, detail=security.refusal(wait))
        serializer = AuthTokenSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        user = serializer.validated_data["user"]
        security.record_success(security.LOGIN, user.get_username())
        token, key = ApiToken.issue(user, name="auth/token")
        return Response({"token": key, "expires_at": token.expires_at})
