"""A py_webauthn relying party serving the FIDO2 conformance API, as a reference for Docs/Benchmark.md.

It answers the requests `webauthn-dev loadtest` makes (POST /attestation/options, /attestation/result,
/assertion/options, /assertion/result; JSON bodies; `{"status":"ok","errorMessage":"",...}` or
`{"status":"failed","errorMessage":"..."}`), the way `webauthn serve` does, so that both servers can be
loaded alike by Tests/Load/compare-py-webauthn.sh. Not for production use.

Versions: Python 3.11, webauthn (py_webauthn) 2.8.0, starlette 1.10.0, uvicorn[standard] 0.54.0
(uvloop, httptools); SQLite through the standard library's sqlite3.

What it does, like ours:
- every check verify_registration_response / verify_authentication_response make (type, id, client
  data type, challenge, origin, RP ID hash, UP, the sign count rule, the signature; the attestation
  statement), plus what py_webauthn leaves to the caller: the challenge bound to the browser session
  that asked for it and consumed once, its expiry (300 s), the credential in allowCredentials, the
  credential's owner equal to the named account and to response.userHandle (required without a name),
  backup eligibility unchanged, the counter updated by compare-and-set in the transaction that consumes
  the challenge;
- accounts created only by a registration that completes; an existing name takes a new credential
  only from a session signed in as it; unknown names get stand-in options (HMAC of the name);
- the session cookie: 16 random bytes and a 16-byte HMAC tag (base64url); pending ceremonies are keyed
  by SHA-256 of it (one per kind per session); a completed registration or sign-in stores a new
  signed-in session (at most 16 per account) and ends the one the browser came with; the same
  security headers as ours.

Storage: one SQLite file (WAL, synchronous=FULL, busy_timeout 5 s), one connection per worker
process, used by one thread of that process (the event loop hands it the statements), so that
`uvicorn --workers 2` works. Environment: WEBAUTHN_RP_ID, WEBAUTHN_ORIGIN (comma-separated),
WEBAUTHN_DB (the SQLite file).
"""

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    options_to_json_dict,
    parse_attestation_object,
    parse_authentication_credential_json,
    parse_registration_credential_json,
)
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AttestationFormat,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    CredentialDeviceType,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

RP_ID = os.environ.get("WEBAUTHN_RP_ID", "localhost")
ORIGINS = [o.strip() for o in os.environ.get("WEBAUTHN_ORIGIN", "http://localhost:8000").split(",") if o.strip()]
DB_PATH = os.environ.get("WEBAUTHN_DB", "py_webauthn.sqlite")
SECURE = all(o.startswith("https://") for o in ORIGINS)
COOKIE = "__Host-webauthn_session" if SECURE else "webauthn_session"
CHALLENGE_LIFETIME = 300.0
SESSION_LIFETIME = 12 * 3600
SESSIONS_PER_USER = 16
MAX_BODY = 64 * 1024
# What ours offers (ES256, EdDSA, ES384, ES512, PS256, RS256), less ES384, which py_webauthn 2.8 lacks.
ALGORITHMS = [
    COSEAlgorithmIdentifier.ECDSA_SHA_256,
    COSEAlgorithmIdentifier.EDDSA,
    COSEAlgorithmIdentifier.ECDSA_SHA_512,
    COSEAlgorithmIdentifier.RSASSA_PSS_SHA_256,
    COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256,
]
TRANSPORTS = {t.value for t in AuthenticatorTransport}

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    handle BLOB PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    name_key TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS credentials (
    id BLOB PRIMARY KEY,
    user_handle BLOB NOT NULL,
    public_key BLOB NOT NULL,
    sign_count INTEGER NOT NULL,
    transports TEXT NOT NULL,
    backup_eligible INTEGER NOT NULL,
    backup_state INTEGER NOT NULL,
    fmt TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_used_at REAL
);
CREATE INDEX IF NOT EXISTS credentials_by_user ON credentials (user_handle);
CREATE TABLE IF NOT EXISTS challenges (
    session_hash BLOB NOT NULL,
    kind TEXT NOT NULL,
    challenge BLOB NOT NULL,
    user_handle BLOB,
    user_name TEXT,
    display_name TEXT,
    new_account INTEGER NOT NULL DEFAULT 0,
    allow TEXT NOT NULL DEFAULT '',
    expires_at REAL NOT NULL,
    PRIMARY KEY (session_hash, kind)
);
CREATE INDEX IF NOT EXISTS challenges_by_expiry ON challenges (expires_at);
CREATE TABLE IF NOT EXISTS sessions (
    id_hash BLOB PRIMARY KEY,
    user_handle BLOB NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (user_handle, created_at);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_at);
CREATE TRIGGER IF NOT EXISTS sessions_per_user AFTER INSERT ON sessions BEGIN
    DELETE FROM sessions WHERE user_handle = NEW.user_handle AND id_hash NOT IN (
        SELECT id_hash FROM sessions WHERE user_handle = NEW.user_handle
        ORDER BY created_at DESC, rowid DESC LIMIT %d);
END;
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value BLOB NOT NULL);
""" % SESSIONS_PER_USER


class Failure(Exception):
    """A refusal: the conformance API's failure envelope with this HTTP status."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def value_of(x) -> str:
    """An enum member's value, or the string py_webauthn left as it was."""
    return getattr(x, "value", x)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# MARK: Storage: one connection, one thread per process


class Store:
    def __init__(self, path: str):
        self.path = path
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
        self.db: sqlite3.Connection | None = None
        self.secret = b""
        self.last_sweep = 0.0
        self.executor.submit(self._open).result()

    def _open(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        db.execute("PRAGMA busy_timeout = 5000")
        db.execute("PRAGMA synchronous = FULL")
        for attempt in range(50):
            # Two workers starting on a new file: switching it to WAL can be refused while the other does.
            try:
                if db.execute("PRAGMA journal_mode = WAL").fetchone()[0] != "wal":
                    raise RuntimeError(f"{self.path}: WAL mode refused")
                db.executescript("BEGIN IMMEDIATE;" + SCHEMA + "COMMIT;")
                break
            except sqlite3.OperationalError:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if attempt == 49:
                    raise
                time.sleep(0.2)
        # The first process to start makes the secret; the other reads it.
        db.execute("INSERT OR IGNORE INTO settings (name, value) VALUES ('secret', ?)", (secrets.token_bytes(32),))
        self.secret = db.execute("SELECT value FROM settings WHERE name = 'secret'").fetchone()[0]
        self.db = db

    async def run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _transaction(self, body):
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            result = body(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    # Registration

    def registration_start(self, session_hash: bytes, name: str, name_key: str, display_name: str, challenge: bytes, now: float):
        db = self.db
        row = db.execute("SELECT handle, display_name FROM users WHERE name_key = ?", (name_key,)).fetchone()
        exclude = []
        if row is None:
            handle, new = secrets.token_bytes(32), True
        else:
            handle, new = row[0], False
            signed_in = db.execute(
                "SELECT user_handle FROM sessions WHERE id_hash = ? AND expires_at > ?", (session_hash, now)
            ).fetchone()
            if signed_in is None or signed_in[0] != handle:
                raise Failure(409, "username_unavailable", "the name is taken; sign in as its account to add a passkey")
            display_name = row[1]
            exclude = db.execute("SELECT id, transports FROM credentials WHERE user_handle = ?", (handle,)).fetchall()
        db.execute(
            "INSERT OR REPLACE INTO challenges (session_hash, kind, challenge, user_handle, user_name, display_name, new_account, expires_at)"
            " VALUES (?, 'registration', ?, ?, ?, ?, ?, ?)",
            (session_hash, challenge, handle, name, display_name, int(new), now + CHALLENGE_LIFETIME),
        )
        return handle, display_name, exclude

    def pending(self, session_hash: bytes, kind: str, credential_id: bytes | None = None):
        db = self.db
        ceremony = db.execute(
            "SELECT challenge, user_handle, user_name, display_name, new_account, allow, expires_at FROM challenges"
            " WHERE session_hash = ? AND kind = ?",
            (session_hash, kind),
        ).fetchone()
        record = None
        if credential_id is not None:
            record = db.execute(
                "SELECT user_handle, public_key, sign_count, backup_eligible FROM credentials WHERE id = ?", (credential_id,)
            ).fetchone()
        return ceremony, record

    def registration_commit(self, session_hash, challenge, ceremony, verified, transports, new_session_hash, now):
        _, handle, name, display_name, new_account, _, _ = ceremony

        def body(db):
            if db.execute(
                "DELETE FROM challenges WHERE session_hash = ? AND kind = 'registration' AND challenge = ?",
                (session_hash, challenge),
            ).rowcount != 1:
                raise Failure(400, "challenge_unknown", "no registration is waiting for this session")
            if db.execute("SELECT 1 FROM credentials WHERE id = ?", (verified.credential_id,)).fetchone():
                raise Failure(400, "credential_already_registered", "the credential is already registered")
            if new_account:
                try:
                    db.execute(
                        "INSERT INTO users (handle, name, name_key, display_name) VALUES (?, ?, ?, ?)",
                        (handle, name, name_key_of(name), display_name),
                    )
                except sqlite3.IntegrityError:
                    raise Failure(409, "username_unavailable", "the name was taken meanwhile")
            db.execute(
                "INSERT INTO credentials (id, user_handle, public_key, sign_count, transports, backup_eligible, backup_state,"
                " fmt, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                (
                    verified.credential_id,
                    handle,
                    verified.credential_public_key,
                    verified.sign_count,
                    ",".join(transports),
                    int(verified.credential_device_type == CredentialDeviceType.MULTI_DEVICE),
                    int(verified.credential_backed_up),
                    value_of(verified.fmt),
                    now,
                ),
            )
            self._sign_in(db, handle, session_hash, new_session_hash, now)

        self._transaction(body)
        self._sweep(now)

    # Authentication

    def authentication_start(self, session_hash: bytes, name: str | None, challenge: bytes, now: float):
        db = self.db
        handle, allow = None, []
        if name is not None:
            row = db.execute("SELECT handle FROM users WHERE name_key = ?", (name_key_of(name),)).fetchone()
            records = []
            if row is not None:
                records = db.execute("SELECT id, transports FROM credentials WHERE user_handle = ?", (row[0],)).fetchall()
            if records:
                handle, allow = row[0], records
            else:
                handle, allow = self.stand_in(name)
        db.execute(
            "INSERT OR REPLACE INTO challenges (session_hash, kind, challenge, user_handle, allow, expires_at)"
            " VALUES (?, 'authentication', ?, ?, ?, ?)",
            (session_hash, challenge, handle, ",".join(b64url(cid) for cid, _ in allow), now + CHALLENGE_LIFETIME),
        )
        return allow

    def stand_in(self, name: str):
        """A handle and one credential descriptor for a name without credentials, the same every time."""
        key = name_key_of(name).encode()
        handle = hmac.new(self.secret, b"stand-in handle\0" + key, hashlib.sha256).digest()
        seed = hmac.new(self.secret, b"stand-in credential\0" + key, hashlib.sha256).digest()
        return handle, [(seed[: (16, 32, 48)[seed[0] % 3]], ("internal", "hybrid", "usb")[seed[1] % 3])]

    def authentication_commit(self, session_hash, challenge, credential_id, expected_count, verified, user_handle, new_session_hash, now):
        def body(db):
            if db.execute(
                "DELETE FROM challenges WHERE session_hash = ? AND kind = 'authentication' AND challenge = ?",
                (session_hash, challenge),
            ).rowcount != 1:
                raise Failure(400, "challenge_unknown", "no sign-in is waiting for this session")
            if db.execute(
                "UPDATE credentials SET sign_count = ?, backup_state = ?, last_used_at = ? WHERE id = ? AND sign_count = ?",
                (verified.new_sign_count, int(verified.credential_backed_up), now, credential_id, expected_count),
            ).rowcount != 1:
                raise Failure(409, "concurrent_update", "another authentication updated this credential at the same time")
            self._sign_in(db, user_handle, session_hash, new_session_hash, now)

        self._transaction(body)
        self._sweep(now)

    # Sessions

    @staticmethod
    def _sign_in(db, user_handle, old_session_hash, new_session_hash, now):
        db.execute(
            "INSERT INTO sessions (id_hash, user_handle, created_at, expires_at) VALUES (?, ?, ?, ?)",
            (new_session_hash, user_handle, now, now + SESSION_LIFETIME),
        )
        db.execute("DELETE FROM sessions WHERE id_hash = ?", (old_session_hash,))

    def _sweep(self, now):
        """Expired challenges and sessions leave the store at most once a minute per process."""
        if now - self.last_sweep < 60:
            return
        self.last_sweep = now
        self.db.execute("DELETE FROM challenges WHERE expires_at < ?", (now,))
        self.db.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))


def name_key_of(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def normalize_name(raw) -> str:
    if not isinstance(raw, str) or not raw:
        raise Failure(400, "response_malformed", "username is missing or empty")
    name = unicodedata.normalize("NFC", raw.strip())
    if not 1 <= len(name.encode()) <= 64 or any(unicodedata.category(c)[0] in "CZ" and c != " " for c in name):
        raise Failure(400, "username_invalid", "the name must be 1 to 64 bytes of visible characters")
    return name


def normalize_display_name(raw, default: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        return default
    name = unicodedata.normalize("NFKC", " ".join(raw.split()))
    if len(name.encode()) > 64 or any(unicodedata.category(c) in ("Cc", "Cf", "Co", "Cn", "Cs") for c in name):
        raise Failure(400, "username_invalid", "the display name must be at most 64 bytes of visible characters")
    return name


# MARK: Sessions (cookies)

store: Store | None = None
_store_lock = threading.Lock()


def get_store() -> Store:
    global store
    if store is None:
        with _store_lock:
            if store is None:
                store = Store(DB_PATH)
    return store


def mint_token() -> bytes:
    nonce = secrets.token_bytes(16)
    return nonce + hmac.new(get_store().secret, b"webauthn session" + nonce, hashlib.sha256).digest()[:16]


def request_token(request: Request) -> bytes | None:
    value = request.cookies.get(COOKIE)
    if value is None or len(value) != 43:
        return None
    try:
        raw = unb64url(value)
    except ValueError:
        return None
    if len(raw) != 32:
        return None
    tag = hmac.new(get_store().secret, b"webauthn session" + raw[:16], hashlib.sha256).digest()[:16]
    return raw if hmac.compare_digest(tag, raw[16:]) else None


def session_hash(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


# MARK: HTTP

SECURITY_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
if SECURE:
    SECURITY_HEADERS["strict-transport-security"] = "max-age=31536000"


def answer(payload: dict, status: int = 200, token: bytes | None = None) -> Response:
    response = Response(json.dumps(payload, separators=(",", ":")).encode(), status_code=status, media_type="application/json", headers=SECURITY_HEADERS)
    if token is not None:
        response.set_cookie(COOKIE, b64url(token), max_age=SESSION_LIFETIME, path="/", secure=SECURE, httponly=True, samesite="strict")
    return response


def ok(payload: dict, token: bytes | None = None) -> Response:
    return answer({"status": "ok", "errorMessage": "", **payload}, token=token)


def endpoint(handler):
    """JSON only; every refusal as the failure envelope; internal errors without detail."""

    async def run(request: Request) -> Response:
        try:
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                raise Failure(415, "content_type_unsupported", "the body must be sent as Content-Type: application/json")
            raw = await request.body()
            if len(raw) > MAX_BODY:
                raise Failure(413, "input_too_large", "the request body is too large")
            try:
                body = json.loads(raw)
            except ValueError:
                raise Failure(400, "json_malformed", "the body is not JSON")
            if not isinstance(body, dict):
                raise Failure(400, "json_malformed", "the body is not a JSON object")
            return await handler(request, body)
        except Failure as failure:
            return answer({"status": "failed", "errorMessage": f"{failure.code}: {failure.message}"}, status=failure.status)
        except Exception as error:  # noqa: BLE001 - the client sees no detail
            print(f"internal error: {error!r}", flush=True)
            return answer({"status": "failed", "errorMessage": "internal_error: the server failed"}, status=500)

    return run


def descriptors(rows):
    return [
        PublicKeyCredentialDescriptor(
            id=cid, transports=[AuthenticatorTransport(t) for t in transports.split(",") if t in TRANSPORTS]
        )
        for cid, transports in rows
    ]


async def attestation_options(request: Request, body: dict) -> Response:
    name = normalize_name(body.get("username"))
    display_name = normalize_display_name(body.get("displayName"), name)
    token = request_token(request) or mint_token()
    challenge = secrets.token_bytes(32)
    s = get_store()
    handle, display_name, exclude = await s.run(
        s.registration_start, session_hash(token), name, name_key_of(name), display_name, challenge, time.time()
    )
    options = generate_registration_options(
        rp_id=RP_ID,
        rp_name=RP_ID,
        user_name=name,
        user_id=handle,
        user_display_name=display_name,
        challenge=challenge,
        timeout=int(CHALLENGE_LIFETIME * 1000),
        attestation=AttestationConveyancePreference.NONE,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.PREFERRED
        ),
        exclude_credentials=descriptors(exclude),
        supported_pub_key_algs=ALGORITHMS,
    )
    return ok(options_to_json_dict(options), token)


async def attestation_result(request: Request, body: dict) -> Response:
    token = request_token(request)
    if token is None:
        raise Failure(400, "challenge_unknown", "no registration is waiting for this session")
    try:
        credential = parse_registration_credential_json(body)
    except Exception as error:
        raise Failure(400, "response_malformed", f"the credential is malformed: {error}")
    s = get_store()
    old = session_hash(token)
    ceremony, _ = await s.run(s.pending, old, "registration")
    now = time.time()
    if ceremony is None:
        raise Failure(400, "challenge_unknown", "no registration is waiting for this session")
    if now > ceremony[6]:
        raise Failure(400, "challenge_expired", "the registration expired")
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=ceremony[0],
            expected_rp_id=RP_ID,
            expected_origin=ORIGINS,
            require_user_verification=False,
            supported_pub_key_algs=ALGORITHMS,
        )
    except Exception as error:
        raise Failure(400, "registration_failed", str(error))
    transports = [value_of(t) for t in (credential.response.transports or [])]
    new_token = mint_token()
    await s.run(s.registration_commit, old, ceremony[0], ceremony, verified, transports, session_hash(new_token), now)
    if verified.fmt == AttestationFormat.NONE:
        attestation_type = "none"
    else:
        attestation_type = "basic" if parse_attestation_object(verified.attestation_object).att_stmt.x5c else "self"
    return ok(
        {
            "credentialId": b64url(verified.credential_id),
            "fmt": value_of(verified.fmt),
            "attestationType": attestation_type,
            "trusted": False,
        },
        new_token,
    )


async def assertion_options(request: Request, body: dict) -> Response:
    raw = body.get("username")
    name = None
    if isinstance(raw, str) and raw:
        try:
            name = normalize_name(raw)
        except Failure:
            name = "\ufffd"  # a name that breaks the rules cannot exist: one stand-in for all
    token = request_token(request) or mint_token()
    challenge = secrets.token_bytes(32)
    s = get_store()
    allow = await s.run(s.authentication_start, session_hash(token), name, challenge, time.time())
    options = generate_authentication_options(
        rp_id=RP_ID,
        challenge=challenge,
        timeout=int(CHALLENGE_LIFETIME * 1000),
        allow_credentials=descriptors(allow),
        user_verification=UserVerificationRequirement.PREFERRED,
    )
    return ok(options_to_json_dict(options), token)


def auth_failed() -> Failure:
    """Every failure after the credential lookup answers alike, as ours does."""
    return Failure(401, "authentication_failed", "the credential could not be verified for this sign-in")


async def assertion_result(request: Request, body: dict) -> Response:
    token = request_token(request)
    if token is None:
        raise Failure(400, "challenge_unknown", "no sign-in is waiting for this session")
    try:
        credential = parse_authentication_credential_json(body)
    except Exception as error:
        raise Failure(400, "response_malformed", f"the credential is malformed: {error}")
    s = get_store()
    old = session_hash(token)
    ceremony, record = await s.run(s.pending, old, "authentication", credential.raw_id)
    now = time.time()
    if ceremony is None:
        raise Failure(400, "challenge_unknown", "no sign-in is waiting for this session")
    challenge, pending_handle, _, _, _, allow, expires_at = ceremony
    if now > expires_at:
        raise Failure(400, "challenge_expired", "the sign-in expired")
    # WebAuthn L3 §7.2 steps 5-6, which py_webauthn leaves to the caller.
    if allow and credential.id not in allow.split(","):
        raise auth_failed()
    if record is None:
        raise auth_failed()
    owner, public_key, sign_count, backup_eligible = record
    user_handle = credential.response.user_handle
    if pending_handle is not None and owner != pending_handle:
        raise auth_failed()
    if pending_handle is None and not user_handle:
        raise auth_failed()
    if user_handle and user_handle != owner:
        raise auth_failed()
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=ORIGINS,
            credential_public_key=public_key,
            credential_current_sign_count=sign_count,
            require_user_verification=False,
        )
    except Exception:
        raise auth_failed()
    # Backup eligibility is fixed at registration (L3 §7.2 step 18).
    if (verified.credential_device_type == CredentialDeviceType.MULTI_DEVICE) != bool(backup_eligible):
        raise auth_failed()
    new_token = mint_token()
    await s.run(s.authentication_commit, old, challenge, credential.raw_id, sign_count, verified, owner, session_hash(new_token), now)
    return ok(
        {
            "credentialId": credential.id,
            "signCount": verified.new_sign_count,
            "userVerified": verified.user_verified,
        },
        new_token,
    )


@contextlib.asynccontextmanager
async def lifespan(_app):
    get_store()
    yield


app = Starlette(
    routes=[
        Route("/attestation/options", endpoint(attestation_options), methods=["POST"]),
        Route("/attestation/result", endpoint(attestation_result), methods=["POST"]),
        Route("/assertion/options", endpoint(assertion_options), methods=["POST"]),
        Route("/assertion/result", endpoint(assertion_result), methods=["POST"]),
    ],
    lifespan=lifespan,
)
