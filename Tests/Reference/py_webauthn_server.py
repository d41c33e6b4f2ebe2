"""A small FIDO2 conformance-API relying party built on py_webauthn, for
trying `webauthn-dev conformance` against another implementation.

Not part of `make test`. Run it by hand (see Docs/Conformance.md):

    python3 -m pip install webauthn==3.0.1 flask
    python3 Tests/Reference/py_webauthn_server.py --port 9100 --rp-id example.com \
        --origin https://example.com --root DIR/runner-root.cert.der
"""
import argparse
import base64
import json
import secrets

from flask import Flask, jsonify, make_response, request
from webauthn import (generate_authentication_options, generate_registration_options, options_to_json,
                      verify_authentication_response, verify_registration_response)
from webauthn.helpers.structs import (AttestationConveyancePreference, AuthenticatorSelectionCriteria,
                                      PublicKeyCredentialDescriptor, ResidentKeyRequirement, UserVerificationRequirement)

app = Flask(__name__)
config = {}
users = {}          # username -> {"id": bytes, "credentials": {id: {...}}}
sessions = {}       # cookie -> {"challenge": bytes, "username": str | None}
by_id = {}          # credential id -> (username, record)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def failed(message, status=400):
    return make_response(jsonify({"status": "failed", "errorMessage": message or "failed"}), status)


def ok(payload, session):
    response = make_response(jsonify({"status": "ok", "errorMessage": "", **payload}))
    response.set_cookie("session", session, httponly=True, samesite="Strict")
    return response


def session_id():
    return request.cookies.get("session") or secrets.token_urlsafe(24)


def shaped(body):
    """The conformance shape has no rawId and getClientExtensionResults; py_webauthn wants browser JSON."""
    body = dict(body)
    body.setdefault("rawId", body.get("id"))
    body["clientExtensionResults"] = body.pop("getClientExtensionResults", body.get("clientExtensionResults", {}))
    return body


@app.post("/attestation/options")
def attestation_options():
    body = request.get_json(force=True, silent=True) or {}
    name = body.get("username")
    if not name:
        return failed("username is required")
    user = users.setdefault(name, {"id": secrets.token_bytes(32), "credentials": {}})
    selection = body.get("authenticatorSelection") or {}
    options = generate_registration_options(
        rp_id=config["rp_id"], rp_name="py_webauthn reference", user_name=name, user_id=user["id"],
        user_display_name=body.get("displayName") or name,
        attestation=AttestationConveyancePreference(body.get("attestation", "none")),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement(selection.get("residentKey", "required" if selection.get("requireResidentKey") else "discouraged")),
            user_verification=UserVerificationRequirement(selection.get("userVerification", "preferred"))),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=cid) for cid in user["credentials"]])
    sid = session_id()
    sessions[sid] = {"challenge": options.challenge, "username": name}
    payload = json.loads(options_to_json(options))
    if selection:
        payload["authenticatorSelection"] = selection  # the conformance API echoes what was asked for
    if "extensions" in body:
        payload["extensions"] = body["extensions"]
    return ok(payload, sid)


@app.post("/attestation/result")
def attestation_result():
    sid = request.cookies.get("session")
    state = sessions.pop(sid, None) if sid else None
    if not state:
        return failed("no registration in progress")
    try:
        verified = verify_registration_response(
            credential=shaped(request.get_json(force=True)), expected_challenge=state["challenge"],
            expected_origin=config["origin"], expected_rp_id=config["rp_id"],
            pem_root_certs_bytes_by_fmt={fmt: [config["root"]] for fmt in ["packed", "tpm", "android-key", "android-safetynet", "apple", "fido-u2f"]})
    except Exception as error:  # py_webauthn raises its own exception types
        return failed(f"{type(error).__name__}: {error}")
    if verified.credential_id in by_id:
        return failed("credential already registered")
    record = {"public_key": verified.credential_public_key, "sign_count": verified.sign_count, "user": state["username"]}
    users[state["username"]]["credentials"][verified.credential_id] = record
    by_id[verified.credential_id] = (state["username"], record)
    return ok({}, sid)


@app.post("/assertion/options")
def assertion_options():
    body = request.get_json(force=True, silent=True) or {}
    name = body.get("username")
    allow = []
    if name:
        if name not in users or not users[name]["credentials"]:
            return failed("unknown user")
        allow = [PublicKeyCredentialDescriptor(id=cid) for cid in users[name]["credentials"]]
    options = generate_authentication_options(
        rp_id=config["rp_id"], allow_credentials=allow,
        user_verification=UserVerificationRequirement(body.get("userVerification", "preferred")))
    sid = session_id()
    sessions[sid] = {"challenge": options.challenge, "username": name, "uv": body.get("userVerification", "preferred")}
    payload = json.loads(options_to_json(options))
    if "extensions" in body:
        payload["extensions"] = body["extensions"]
    return ok(payload, sid)


@app.post("/assertion/result")
def assertion_result():
    sid = request.cookies.get("session")
    state = sessions.pop(sid, None) if sid else None
    if not state:
        return failed("no authentication in progress")
    body = shaped(request.get_json(force=True))
    try:
        credential_id = base64.urlsafe_b64decode(body["id"] + "=" * (-len(body["id"]) % 4))
        owner, record = by_id[credential_id]
        # The RP's part (L3 §7.2 step 6): the credential belongs to the user, and a
        # userHandle, required for a discoverable login, is the owner's.
        handle = (body.get("response") or {}).get("userHandle")
        owner_id = b64(users[owner]["id"])
        if state["username"] and owner != state["username"]:
            return failed("credential of another user")
        if (not state["username"] and not handle) or (handle and handle.rstrip("=") != owner_id):
            return failed("userHandle missing or not the credential owner's")
        verified = verify_authentication_response(
            credential=body, expected_challenge=state["challenge"], expected_rp_id=config["rp_id"],
            expected_origin=config["origin"], credential_public_key=record["public_key"],
            credential_current_sign_count=record["sign_count"],
            require_user_verification=state.get("uv") == "required")
    except Exception as error:
        return failed(f"{type(error).__name__}: {error}")
    record["sign_count"] = verified.new_sign_count
    return ok({}, sid)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--rp-id", default="example.com")
    parser.add_argument("--origin", default="https://example.com")
    parser.add_argument("--root", required=True, help="DER root the runner wrote (runner-root.cert.der)")
    args = parser.parse_args()
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    config.update(rp_id=args.rp_id, origin=args.origin,
                  root=x509.load_der_x509_certificate(open(args.root, "rb").read()).public_bytes(Encoding.PEM))
    app.run(host="127.0.0.1", port=args.port)
