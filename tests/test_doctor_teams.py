"""`yokebot doctor` with Teams: the credentials are checked by a real token fetch at the (fake) login endpoint,
and the OpenID metadata inbound tokens are checked against is read; a refused secret says what to fix, and no
secret is printed."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.teams import APP_ID, APP_PASSWORD, FakeTeams
from tests.test_cli import base_env, ops_agent
from tests.test_doctor import doctor


def test_doctor_fetches_a_teams_token_and_reads_the_signing_keys(tmp_path: Path, fake_llm: FakeOpenAI,
                                                                 fake_teams: FakeTeams):
    ops_agent(tmp_path)
    fake_llm.models = ["cli-model"]
    out, text = doctor(base_env(tmp_path, fake_llm) | fake_teams.env())
    assert out.returncode == 0, out.stdout
    assert f"✓ teams: credentials work: a token for app {APP_ID}" in text
    assert "✓ teams: inbound requests are checked against 1 signing keys" in text
    assert [t["client_id"] for t in fake_teams.tokens] == [APP_ID]

    out, text = doctor(base_env(tmp_path, fake_llm) | fake_teams.env() | {"TEAMS_APP_PASSWORD": "wrong-secret-1"})
    assert out.returncode != 0
    assert "✗ teams: Microsoft refused the credentials of TEAMS_APP_ID (invalid_client: AADSTS7000215" in text
    assert "TEAMS_APP_PASSWORD" in text and "wrong-secret-1" not in out.stdout + out.stderr
    assert APP_PASSWORD not in out.stdout + out.stderr


def test_a_certificate_instead_of_a_secret_signs_the_client_assertion(tmp_path: Path, fake_llm: FakeOpenAI,
                                                                      fake_teams: FakeTeams):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "yokebot")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    pem = tmp_path / "teams.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()) + cert.public_bytes(serialization.Encoding.PEM))
    fake_teams.certificate = cert
    ops_agent(tmp_path)
    fake_llm.models = ["cli-model"]
    env = {k: v for k, v in (base_env(tmp_path, fake_llm) | fake_teams.env()).items() if k != "TEAMS_APP_PASSWORD"}
    out, text = doctor(env | {"TEAMS_CERTIFICATE_PATH": str(pem)})
    assert out.returncode == 0, out.stdout
    assert "✓ teams: credentials work" in text
    [form] = fake_teams.tokens
    assert "client_secret" not in form and form["client_assertion_type"].endswith("jwt-bearer")
