"""Webhooks go only where the installation allows (docs/security.md, "Outbound requests"):
the attacks of a developer (``alerts.webhook``) and of a team admin (team destinations) on the
installation's own network, at registration and at delivery, each made for real against a
server on 127.0.0.1; no test connects anywhere else (the ``network`` fixture)."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import socketserver
import ssl
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.exceptions import ValidationError

from alerts import outbound
from alerts.channels import COULD_NOT_DELIVER
from alerts.models import Alert, Destination
from processes import registry
from processes.models import Property
from tests.helpers.alerts import NAMES, Receiver, alerting, fail_once, serving
from tests.helpers.api import api_as
from tests.helpers.local_servers import served

API = "/api/v1"
FIX = "ask your installation's admin to list it in BDRE_ALERT_ALLOWED_HOSTS"

# The attacks of the issue: the host's own services, its metadata service, in the forms a
# URL may spell them.
ATTACKS = [
    "http://127.0.0.1:{port}/",
    "http://localhost/",
    "http://[::1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://2130706433/",
    "http://0x7f.1/",
]


# --- the rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "0x7f.1",
        "localhost",
        "localhost.",
        "LOCALHOST",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::ffff:a9fe:a9fe]",
        "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1
        "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
        "[2001:0:4136:e378:8000:63bf:80ff:fffe]",  # Teredo, its client 127.0.0.1
        "169.254.169.254",
        "[fe80::1]",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",
        "[fc00::1]",
        "[fec0::1]",
        "0.0.0.0",
        "0",
        "[::]",
        "224.0.0.1",
        "[ff02::1]",
        "[ff0e::1]",  # global multicast: ipaddress calls it global
        "240.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "[2001:db8::1]",
    ],
)
def test_an_address_of_the_installations_own_network_is_refused_in_every_form(host):
    with pytest.raises(outbound.Refused, match=FIX):
        outbound.check(f"http://{host}:8080/hook")


def test_a_name_with_one_address_inside_among_public_ones_is_refused(monkeypatch):
    monkeypatch.setitem(NAMES, "hooks.example.org", ["93.184.215.14", "10.1.2.3"])
    with pytest.raises(outbound.Refused) as refused:
        outbound.check("https://hooks.example.org/x")
    assert str(refused.value).startswith("hooks.example.org does not resolve to public")
    # The address is not told: the name's answers inside are the installation's business.
    assert "10.1.2.3" not in str(refused.value)


def test_a_name_that_does_not_resolve_is_refused_in_the_words_of_one_that_resolves_inside(
    monkeypatch,
):
    monkeypatch.setitem(NAMES, "intranet.example.org", ["10.1.2.3"])
    with pytest.raises(outbound.Refused) as inside:
        outbound.check("https://intranet.example.org/x")
    with pytest.raises(outbound.Refused) as nowhere:
        outbound.check("https://nowhere.example.org/x")
    assert str(inside.value).replace("intranet", "nowhere") == str(nowhere.value)


@pytest.mark.parametrize("host", ["1.2.3.4.5", "256.1.1.1", "0x1g.1", "a b.example.com"])
def test_a_host_that_is_neither_an_address_nor_a_name_is_refused(host):
    with pytest.raises(outbound.Refused):
        outbound.check(f"http://{host}/")


def test_a_public_host_is_allowed_at_the_addresses_checked():
    checked = outbound.check("https://hooks.slack.com/services/T/B/X?x=1")
    assert checked == outbound.Checked(
        "https",
        "hooks.slack.com",
        443,
        "/services/T/B/X?x=1",
        (ipaddress.ip_address("54.230.0.1"), ipaddress.ip_address("2600:9000:2000::1")),
    )
    assert outbound.check("http://8.8.8.8/").addresses == (ipaddress.ip_address("8.8.8.8"),)
    assert outbound.check("http://[::ffff:8.8.8.8]/").port == 80


def test_hosts_and_addresses_the_admin_listed_are_allowed_and_nothing_else(settings, monkeypatch):
    monkeypatch.setitem(NAMES, "chat.corp", ["10.0.0.7"])
    monkeypatch.setitem(NAMES, "wiki.corp", ["10.0.0.8"])
    settings.BDRE_ALERT_ALLOWED_HOSTS = ["Chat.Corp", "[::1]", "192.168.1.20"]
    assert outbound.check("http://chat.corp./hook").host == "chat.corp"
    assert outbound.check("http://[::1]:9000/").addresses == (ipaddress.ip_address("::1"),)
    assert outbound.check("http://192.168.1.20/").port == 80
    for refused in ("http://wiki.corp/", "http://127.0.0.1/", "http://192.168.1.21/"):
        with pytest.raises(outbound.Refused):
            outbound.check(refused)


# --- registration: a 400 that says what to fix ----------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("url", ATTACKS)
def test_a_developer_cannot_register_a_webhook_into_the_installations_network(
    team, make_job, receiver, url
):
    job = make_job("orders")
    answer = api_as(team.developer).post(
        f"{API}/properties/",
        {
            "process": job.pk,
            "config_group": "alerts",
            "key": "webhook",
            "value": url.format(port=receiver.port),
        },
        format="json",
    )
    assert answer.status_code == 400
    [says] = answer.json()["value"]
    assert "alerts.webhook: " in says and FIX in says
    with pytest.raises(ValidationError, match="BDRE_ALERT_ALLOWED_HOSTS"):
        registry.set_properties(job, {"alerts": {"webhook": url.format(port=receiver.port)}})
    assert not job.properties.filter(config_group="alerts").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("url", ATTACKS)
def test_a_team_admin_cannot_add_a_destination_into_the_installations_network(team, receiver, url):
    client = api_as(team.admin)
    answer = client.post(
        f"{API}/alert-destinations/",
        {"team": team.group.pk, "channel": "webhook", "target": url.format(port=receiver.port)},
        format="json",
    )
    assert answer.status_code == 400
    assert FIX in answer.json()["target"][0]
    # Nor change a good one into one.
    good = Destination.objects.create(
        team=team.group, channel="webhook", target="https://hooks.example.com/x"
    )
    answer = client.patch(
        f"{API}/alert-destinations/{good.pk}/",
        {"target": url.format(port=receiver.port)},
        format="json",
    )
    assert answer.status_code == 400
    good.refresh_from_db()
    assert good.target == "https://hooks.example.com/x"


@pytest.mark.django_db
def test_a_listed_receiver_is_registered(team, make_job, webhook):
    job = alerting(make_job("orders"), webhook=webhook.url)
    assert job.properties.get(config_group="alerts", key="webhook").value == webhook.url


# --- delivery: checked again, never called -----------------------------------------------------

INSIDE = [
    "http://127.0.0.1:{port}/hooks",
    "http://localhost:{port}/hooks",
    "http://2130706433:{port}/hooks",
    "http://0x7f.1:{port}/hooks",
    "http://0177.0.0.1:{port}/hooks",
    "http://[::ffff:127.0.0.1]:{port}/hooks",
    "http://[::1]:{port}/hooks",
    "http://169.254.169.254/latest/meta-data/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", INSIDE)
def test_a_jobs_webhook_stored_past_the_registry_is_not_called_and_the_team_reads_could_not_deliver(
    team, make_job, receiver, network, eager, django_capture_on_commit_callbacks, url
):
    job = make_job("orders", max_retries=10)
    target = url.format(port=receiver.port)
    Property.objects.create(process=job, config_group="alerts", key="webhook", value=target)
    fail_once(job, "boom", django_capture_on_commit_callbacks)

    assert receiver.posts == [] and network.connected == []
    [alert] = api_as(team.viewer).get(f"{API}/alerts/", {"job": job.pk}).json()["results"]
    assert (alert["destination"], alert["status"]) == (target, "failed")
    assert alert["error"] == COULD_NOT_DELIVER


@pytest.mark.django_db
@pytest.mark.parametrize("url", INSIDE)
def test_a_team_destination_stored_past_the_check_is_not_called(
    team, make_job, receiver, network, eager, django_capture_on_commit_callbacks, url
):
    job = make_job("orders", max_retries=10)
    Destination.objects.create(
        team=team.group, channel="webhook", target=url.format(port=receiver.port)
    )
    fail_once(job, "boom", django_capture_on_commit_callbacks)

    assert receiver.posts == [] and network.connected == []
    alert = Alert.objects.get(job=job)
    assert (alert.status, alert.error) == ("failed", COULD_NOT_DELIVER)


@dataclass
class Raw:
    """A TCP server on 127.0.0.1 that answers every connection ``answer`` (nothing: it
    drops the connection) after reading what was sent."""

    answer: bytes | None
    port: int = 0
    received: list[bytes] = field(default_factory=list)


@contextmanager
def raw_server(raw: Raw) -> Iterator[Raw]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(5)
            with suppress(OSError):  # a client that sends nothing is answered all the same
                raw.received.append(self.request.recv(65536))
            if raw.answer is not None:
                self.request.sendall(raw.answer)

    with served(Handler, http=False) as server:
        raw.port = server.server_address[1]
        yield raw


@contextmanager
def closed_port() -> Iterator[int]:
    """A port of 127.0.0.1 where nothing listens (bound, so that nothing else takes it)."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


@pytest.mark.django_db
def test_a_refused_a_dropped_connection_and_an_http_401_read_the_same_to_the_team(
    team, make_job, webhook, eager, django_capture_on_commit_callbacks, caplog
):
    webhook.status = 401
    with closed_port() as port, raw_server(Raw(answer=None)) as dropping:
        targets = [
            f"http://127.0.0.1:{port}/",
            f"http://127.0.0.1:{dropping.port}/",
            webhook.url,
        ]
        for target in targets:
            Destination.objects.create(team=team.group, channel="webhook", target=target)
        fail_once(make_job("orders", max_retries=10), "boom", django_capture_on_commit_callbacks)

    errors = dict(Alert.objects.values_list("destination", "error"))
    assert errors == dict.fromkeys(targets, COULD_NOT_DELIVER)
    assert set(Alert.objects.values_list("status", flat=True)) == {"failed"}
    # The installation's log has each reason.
    assert "ConnectionRefusedError" in caplog.text
    assert "RemoteDisconnected" in caplog.text
    assert "HTTP 401" in caplog.text


@pytest.mark.django_db
def test_a_service_that_is_not_http_fails_the_delivery_and_the_next_destination_gets_its_own(
    team, make_job, webhook, eager, django_capture_on_commit_callbacks, caplog
):
    with raw_server(Raw(answer=b"SSH-2.0-OpenSSH_9.6\r\n")) as ssh:
        garbage = f"http://127.0.0.1:{ssh.port}/"
        job = alerting(make_job("orders", max_retries=10), webhook=garbage)
        Destination.objects.create(team=team.group, channel="webhook", target=webhook.url)
        fail_once(job, "boom", django_capture_on_commit_callbacks)
        assert ssh.received and ssh.received[0].startswith(b"POST / HTTP/1.1")

    statuses = dict(Alert.objects.values_list("destination", "status"))
    assert statuses == {garbage: "failed", webhook.url: "sent"}
    assert Alert.objects.get(destination=garbage).error == COULD_NOT_DELIVER
    assert [post["kind"] for post in webhook.posts] == ["failure"]
    assert "BadStatusLine" in caplog.text


@pytest.mark.django_db
def test_an_unforeseen_error_at_one_destination_leaves_the_next_its_delivery(
    team, make_job, webhook, monkeypatch, eager, django_capture_on_commit_callbacks, caplog
):
    post = outbound.post
    broken = "https://hooks.example.com/broken"

    def post_or_break(url: str, *args: object) -> int:
        if url == broken:
            raise RuntimeError("a bug in a channel")
        return post(url, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(outbound, "post", post_or_break)
    job = alerting(make_job("orders", max_retries=10), webhook=broken)
    Destination.objects.create(team=team.group, channel="webhook", target=webhook.url)
    fail_once(job, "boom", django_capture_on_commit_callbacks)

    statuses = dict(Alert.objects.values_list("destination", "status"))
    assert statuses == {broken: "failed", webhook.url: "sent"}
    assert Alert.objects.get(destination=broken).error == COULD_NOT_DELIVER
    assert len(webhook.posts) == 1 and "a bug in a channel" in caplog.text


@pytest.mark.django_db
def test_a_redirect_is_not_followed(
    team, make_job, webhook, eager, django_capture_on_commit_callbacks
):
    with serving(Receiver(url="")) as elsewhere:
        webhook.status, webhook.location = 302, elsewhere.url
        job = alerting(make_job("orders", max_retries=10), webhook=webhook.url)
        fail_once(job, "boom", django_capture_on_commit_callbacks)
        assert len(webhook.posts) == 1 and elsewhere.posts == []
    alert = Alert.objects.get(job=job)
    assert (alert.status, alert.error) == ("failed", COULD_NOT_DELIVER)


# --- DNS rebinding -------------------------------------------------------------------------------


@pytest.fixture
def rebinding(monkeypatch) -> list[str]:
    """``rebind.example.com``: a public address at the first look-up, 127.0.0.1 at every
    one after (what an attacker's DNS server with a zero TTL answers)."""
    asked: list[str] = []
    known = outbound.resolve

    def resolve(host: str, port: int) -> list[outbound.IPAddress]:
        if host != "rebind.example.com":
            return known(host, port)
        asked.append(host)
        first = len(asked) == 1
        return [ipaddress.ip_address("93.184.215.14" if first else "127.0.0.1")]

    monkeypatch.setattr(outbound, "resolve", resolve)
    return asked


@pytest.mark.django_db
def test_a_name_that_turns_inside_after_the_check_is_called_at_the_address_checked_only(
    make_job, receiver, network, rebinding, eager, django_capture_on_commit_callbacks
):
    job = make_job("orders", max_retries=10)
    target = f"http://rebind.example.com:{receiver.port}/hooks"
    Property.objects.create(process=job, config_group="alerts", key="webhook", value=target)
    fail_once(job, "boom", django_capture_on_commit_callbacks)

    # The delivery's check saw the public address, and the connection went there (refused by
    # the tests' network), not to the name's next answer.
    assert network.connected == ["93.184.215.14"]
    assert receiver.posts == []
    assert Alert.objects.get(job=job).error == COULD_NOT_DELIVER


@pytest.mark.django_db
def test_a_name_registered_public_that_turns_inside_is_refused_at_delivery(
    team, make_job, receiver, network, rebinding, eager, django_capture_on_commit_callbacks
):
    job = make_job("orders", max_retries=10)
    target = f"http://rebind.example.com:{receiver.port}/hooks"
    registered = api_as(team.developer).post(
        f"{API}/properties/",
        {"process": job.pk, "config_group": "alerts", "key": "webhook", "value": target},
        format="json",
    )
    assert registered.status_code == 201, registered.json()
    fail_once(job, "boom", django_capture_on_commit_callbacks)

    assert network.connected == [] and receiver.posts == []
    assert Alert.objects.get(job=job).error == COULD_NOT_DELIVER


# --- https: the name is verified, the address is the one checked ---------------------------------


@dataclass
class Tls:
    port: int = 0
    server_names: list[str | None] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


def _certificates(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for ``name`` it signed: (CA, certificate, key) files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "BDRE test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@contextmanager
def tls_receiver(tmp_path: Path, certified_name: str, monkeypatch) -> Iterator[Tls]:
    """An https server on 127.0.0.1 with a certificate for ``certified_name``, from a CA
    that ``alerts.outbound`` trusts for the test; it records the SNI and Host it gets."""
    ca, cert, key = _certificates(tmp_path, certified_name)
    seen = Tls()

    def trusting() -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(ca))

    monkeypatch.setattr(outbound, "tls_context", trusting)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: seen.server_names.append(name)  # type: ignore[assignment,misc]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.hosts.append(self.headers["Host"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with served(Handler, tls=context) as server:
        seen.port = server.server_address[1]
        yield seen


def test_https_verifies_the_name_and_connects_to_the_address_checked(
    tmp_path, monkeypatch, settings, network
):
    monkeypatch.setitem(NAMES, "chat.corp", ["127.0.0.1"])
    settings.BDRE_ALERT_ALLOWED_HOSTS = ["chat.corp"]
    with tls_receiver(tmp_path, "chat.corp", monkeypatch) as tls:
        url = f"https://chat.corp:{tls.port}/hooks"
        assert outbound.post(url, b"{}", {"Content-Type": "application/json"}, 5) == 204
    assert network.connected == ["127.0.0.1"]
    assert tls.server_names == ["chat.corp"]
    assert tls.hosts == [f"chat.corp:{tls.port}"]


def test_https_to_a_server_certified_for_another_name_is_not_delivered(
    tmp_path, monkeypatch, settings, network
):
    monkeypatch.setitem(NAMES, "chat.corp", ["127.0.0.1"])
    settings.BDRE_ALERT_ALLOWED_HOSTS = ["chat.corp"]
    with (
        tls_receiver(tmp_path, "other.corp", monkeypatch) as tls,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        outbound.post(f"https://chat.corp:{tls.port}/hooks", b"{}", {}, 5)
    assert tls.hosts == []
