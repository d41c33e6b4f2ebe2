"""Real-browser test: headless Chromium and its WebAuthn virtual authenticators
drive `webauthn serve` through the demo page's own JavaScript.

Run by `make test` (which installs chromium, chromium-driver and selenium).
Talks only to loopback.
"""
import os
import re
import socket
import subprocess
import tempfile
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.virtual_authenticator import Protocol, Transport, VirtualAuthenticatorOptions

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.path.join(ROOT, ".build", "debug", "webauthn")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    db = os.path.join(tempfile.mkdtemp(), "browser.sqlite")
    proc = subprocess.Popen(
        [BINARY, "serve", "--port", str(port), "--rp-id", "localhost", "--origin", f"http://localhost:{port}",
         "--db", f"sqlite:{db}", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert "listening" in line, line
    yield f"http://localhost:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def driver():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,800"]:
        options.add_argument(arg)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    d.set_script_timeout(30)
    yield d
    d.quit()


def use_authenticator(driver, protocol, transport, resident, uv):
    try:
        driver.remove_virtual_authenticator()
    except Exception:
        pass
    driver.add_virtual_authenticator(VirtualAuthenticatorOptions(
        protocol=protocol, transport=transport, has_resident_key=resident, has_user_verification=uv,
        is_user_consenting=True, is_user_verified=uv))


REGISTER = """
const [username, attestation, residentKey, done] = arguments;
(async () => {
  abortConditional();
  const options = await post('/attestation/options', { username, displayName: username, attestation,
    authenticatorSelection: { residentKey, userVerification: 'preferred' } });
  const credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
  const result = await post('/attestation/result', toJSON(credential));
  done({ ok: true, result, id: credential.id });
})().catch(e => done({ ok: false, error: String(e && e.message || e) }));
"""

SIGN_IN = """
const [username, tamper, done] = arguments;
(async () => {
  abortConditional();
  const options = await post('/assertion/options', username ? { username } : {});
  const credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
  const json = toJSON(credential);
  if (tamper) {
    const sig = new Uint8Array(b64.decode(json.response.signature));
    sig[sig.length - 1] ^= 1;
    json.response.signature = b64.encode(sig.buffer);
  }
  const result = await post('/assertion/result', json);
  done({ ok: true, result });
})().catch(e => done({ ok: false, error: String(e && e.message || e) }));
"""

CREDENTIALS = """
const done = arguments[0];
fetch('/demo/credentials', { credentials: 'same-origin' }).then(r => r.json()).then(done, e => done({ error: String(e) }));
"""


def register(driver, username, attestation="none", resident="preferred"):
    return driver.execute_async_script(REGISTER, username, attestation, resident)


def sign_in(driver, username=None, tamper=False):
    return driver.execute_async_script(SIGN_IN, username, tamper)


def test_platform_passkey_with_username_and_discoverable_login(server, driver):
    driver.get(server + "/")
    assert "WebAuthn" in driver.title
    use_authenticator(driver, Protocol.CTAP2, Transport.INTERNAL, resident=True, uv=True)
    reg = register(driver, "alice", attestation="none", resident="required")
    assert reg["ok"], reg
    assert reg["result"]["fmt"] == "none"
    by_name = sign_in(driver, "alice")
    assert by_name["ok"], by_name
    assert by_name["result"]["userVerified"] is True
    discoverable = sign_in(driver, None)
    assert discoverable["ok"], discoverable
    driver.get(server + "/")
    time.sleep(0.5)
    driver.save_screenshot(os.path.join(tempfile.gettempdir(), "webauthn-demo.png"))
    assert "alice" in driver.find_element("id", "who").text


def test_usb_security_key_direct_attestation_and_rising_counter(server, driver):
    driver.get(server + "/")
    use_authenticator(driver, Protocol.CTAP2, Transport.USB, resident=False, uv=False)
    reg = register(driver, "bob", attestation="direct", resident="discouraged")
    assert reg["ok"], reg
    assert reg["result"]["fmt"] == "packed"
    counts = []
    for _ in range(3):
        result = sign_in(driver, "bob")
        assert result["ok"], result
        counts.append(result["result"]["signCount"])
    assert counts == sorted(counts) and len(set(counts)) == 3, counts
    listing = driver.execute_async_script(CREDENTIALS)
    assert listing["credentials"][0]["signCount"] == counts[-1]


def test_u2f_security_key(server, driver):
    driver.get(server + "/")
    use_authenticator(driver, Protocol.U2F, Transport.USB, resident=False, uv=False)
    reg = register(driver, "carol", attestation="direct", resident="discouraged")
    assert reg["ok"], reg
    assert reg["result"]["fmt"] == "fido-u2f"
    result = sign_in(driver, "carol")
    assert result["ok"], result


def test_tampered_assertion_is_refused(server, driver):
    driver.get(server + "/")
    use_authenticator(driver, Protocol.CTAP2, Transport.USB, resident=False, uv=False)
    assert register(driver, "dave", attestation="none", resident="discouraged")["ok"]
    tampered = sign_in(driver, "dave", tamper=True)
    assert not tampered["ok"]
    # One generic answer for a bad signature (the server log has signature_invalid).
    assert tampered["error"].startswith("authentication_failed"), tampered
    assert sign_in(driver, "dave")["ok"]


ADD_PASSKEY = """
const done = arguments[0];
(async () => {
  await refresh();
  document.getElementById('add-passkey').click();
  for (let i = 0; i < 100; i++) {
    await new Promise(r => setTimeout(r, 100));
    const s = document.getElementById('status');
    if (s.className) return done({ ok: s.className === 'ok', text: s.textContent });
  }
  done({ ok: false, text: 'timed out' });
})().catch(e => done({ ok: false, text: String(e) }));
"""


def test_add_a_passkey_while_signed_in_and_not_as_a_stranger(server, driver):
    driver.get(server + "/")
    use_authenticator(driver, Protocol.CTAP2, Transport.USB, resident=False, uv=False)
    assert register(driver, "erin", attestation="none", resident="discouraged")["ok"]
    # Signed in: "Add a passkey" enrolls a second authenticator on the same account.
    use_authenticator(driver, Protocol.CTAP2, Transport.INTERNAL, resident=True, uv=True)
    added = driver.execute_async_script(ADD_PASSKEY)
    assert added["ok"], added
    assert len(driver.execute_async_script(CREDENTIALS)["credentials"]) == 2
    # Signed out, the same name is taken: a stranger cannot enroll onto it.
    driver.execute_async_script("const done = arguments[0]; fetch('/demo/logout', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(() => done())")
    stranger = register(driver, "erin", attestation="none", resident="discouraged")
    assert not stranger["ok"]
    assert stranger["error"].startswith("username_unavailable"), stranger
    # The page has no inline script: it runs under the Content-Security-Policy.
    assert driver.execute_script("return typeof post") == "function"


PROVIDERS = os.path.join(ROOT, "TestVectors", "passkey-providers", "sample.json")


@pytest.fixture(scope="module")
def lifecycle_server():
    """`webauthn serve` with the sample passkey-provider list (which names Chromium's virtual authenticator)."""
    port = free_port()
    db = os.path.join(tempfile.mkdtemp(), "lifecycle.sqlite")
    proc = subprocess.Popen(
        [BINARY, "serve", "--port", str(port), "--rp-id", "localhost", "--origin", f"http://localhost:{port}",
         "--db", f"sqlite:{db}", "--log-level", "warning", "--passkey-providers", PROVIDERS],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert "listening" in line, line
    yield f"http://localhost:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def cdp_authenticator(driver):
    """A CTAP 2.1 platform authenticator with UV, PRF and large blobs, backup eligible (a synced passkey),
    through the DevTools protocol (selenium's own options cannot ask for the extensions)."""
    try:
        driver.remove_virtual_authenticator()
    except Exception:
        pass
    driver.execute_cdp_cmd("WebAuthn.enable", {})
    return driver.execute_cdp_cmd("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "ctap2Version": "ctap2_1", "transport": "internal", "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True, "hasPrf": True, "hasLargeBlob": True,
        "defaultBackupEligibility": True, "defaultBackupState": True}})["authenticatorId"]


def wait_status(driver, before=None, seconds=20):
    """Waits for #status to show an outcome (class ok or error) other than `before`; returns (class, text)."""
    def outcome():
        # Class and text read together: read apart, the class of one status could pair with the
        # text of the next (an "ok" class with the step-up's "Confirm it is you…").
        kind, text = driver.execute_script("const s = document.getElementById('status'); return [s.className, s.textContent];")
        return (kind, text) if kind and (kind, text) != before else None
    return wait_for(outcome, seconds) or ("timeout", driver.find_element("id", "status").text)


def signals(driver):
    return driver.execute_script("return signals.map(s => ({...s}))")


def fill_dialog(driver, input_id, text, ok_id):
    field = driver.find_element("id", input_id)
    field.clear()
    field.send_keys(text)
    driver.find_element("id", ok_id).click()


def test_account_view_names_rename_signals_and_step_up(lifecycle_server, driver):
    driver.delete_all_cookies()
    driver.get(lifecycle_server + "/")
    authenticator = cdp_authenticator(driver)
    try:
        # Register through the page: it asks for credProps and prf; the server records both.
        driver.find_element("id", "username").send_keys("grace")
        driver.find_element("id", "register").click()
        assert wait_status(driver)[0] == "ok", driver.find_element("id", "status").text
        listing = driver.execute_async_script(CREDENTIALS)["credentials"]
        assert len(listing) == 1
        first = listing[0]
        assert first["discoverable"] is True and first["prf"] is True and first["synced"] is True, first
        # Named from the provider list, with its icon, and shown so in the account view.
        assert first["provider"] == "Chromium virtual authenticator" and first["providerSource"] == "provider-list", first
        assert wait_for(lambda: driver.find_elements("css selector", "#credentials li.credential img"))
        # Rename through the dialog.
        driver.find_element("css selector", "#credentials li.credential button.rename").click()
        fill_dialog(driver, "rename-input", "Work laptop", "rename-ok")
        assert wait_status(driver, ("ok", "Registered (packed, basic).")) == ("ok", "Renamed."), driver.find_element("id", "status").text
        assert driver.execute_async_script(CREDENTIALS)["credentials"][0]["name"] == "Work laptop"
        assert wait_for(lambda: "Work laptop" in driver.find_element("id", "credentials").text)
        # A display-name change: the page tells the provider (signalCurrentUserDetails).
        driver.find_element("id", "edit-display-name").click()
        fill_dialog(driver, "rename-input", "Grace Hopper", "rename-ok")
        assert wait_status(driver, ("ok", "Renamed."))[1] == "Display name changed."
        sent = signals(driver)
        assert {"method": "signalCurrentUserDetails", "supported": True, "sent": True} in sent, sent
        # A second credential, on a security key without user verification (one authenticator holds
        # one credential per account); then sign out and back in with that key: no user verification.
        key = driver.execute_cdp_cmd("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "transport": "usb", "hasResidentKey": False, "hasUserVerification": False}})["authenticatorId"]
        driver.execute_cdp_cmd("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": authenticator, "enabled": False})
        driver.execute_script("document.getElementById('add-passkey').click();")
        added = wait_status(driver, ("ok", "Display name changed."))
        assert added[0] == "ok", added
        assert len(driver.execute_async_script(CREDENTIALS)["credentials"]) == 2
        driver.execute_script("document.getElementById('logout').click();")
        assert wait_for(lambda: driver.find_element("id", "welcome").is_displayed())
        driver.execute_script("document.getElementById('username').value = 'grace'; document.getElementById('signin').click();")
        signed = wait_status(driver, ("", "Signed out."))
        assert signed[1] == "Signed in.", signed
        assert driver.execute_async_script(SESSION)["recentlyVerified"] is False
        driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": key})
        driver.execute_cdp_cmd("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": authenticator, "enabled": True})
        # Deleting the passkey now needs a step-up: the page runs it (a modal get with UV) and retries.
        before = driver.execute_async_script(CREDENTIALS)["credentials"]
        gone = before[0]["id"]
        driver.find_elements("css selector", "#credentials li.credential button.delete")[0].click()
        assert "Delete" in driver.find_element("id", "confirm-text").text
        driver.find_element("id", "confirm-ok").click()
        assert wait_status(driver, ("ok", "Signed in."))[1] == "Deleted.", driver.find_element("id", "status").text
        assert driver.execute_script("return stepUps") == 1
        after = driver.execute_async_script(CREDENTIALS)["credentials"]
        assert [c["id"] for c in after] == [c["id"] for c in before[1:]]
        sent = signals(driver)
        assert {"method": "signalAllAcceptedCredentials", "supported": True, "sent": True} in sent, sent
        # A sign-in with the deleted credential: refused, and the page signals it as unknown.
        held = [c["credentialId"] for c in driver.execute_cdp_cmd("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]]
        result = driver.execute_async_script("""
const [id, done] = arguments;
(async () => {
  const options = await post('/assertion/options', {});
  options.allowCredentials = [{ type: 'public-key', id }];
  const credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
  await post('/assertion/result', toJSON(credential));
  done({ ok: true });
})().catch(e => done({ ok: false, error: String(e && e.message || e) }));
""", gone)
        assert not result["ok"], result
        if result["error"].startswith("authentication_failed"):
            sent = signals(driver)
            assert {"method": "signalUnknownCredential", "supported": True, "sent": True} in sent, sent
        else:
            # The provider already dropped it after signalAllAcceptedCredentials: nothing to sign with.
            assert "NotAllowedError" in result["error"] or "not allowed" in result["error"].lower(), (result, held)
        driver.save_screenshot(os.path.join(tempfile.gettempdir(), "webauthn-account.png"))
        print("account view screenshot:", os.path.join(tempfile.gettempdir(), "webauthn-account.png"))
        # Sign out everywhere: the page shows the welcome card again, and the session is gone.
        driver.execute_script("document.getElementById('logout-everywhere').click();")
        assert wait_for(lambda: driver.find_element("id", "welcome").is_displayed())
        assert driver.find_element("id", "status").text == "Signed out on every device."
        assert driver.execute_async_script(SESSION)["user"] is None
    finally:
        driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator})


DEV_BINARY = os.path.join(ROOT, ".build", "debug", "webauthn-dev")


def start(argv):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert "listening" in line, line
    return proc, line


@pytest.fixture(scope="module")
def apple_server():
    """`webauthn serve` with the Sign in with Apple web flow, against the stand-in
    (`webauthn-dev apple-stand-in`) on loopback. Both answer on `localhost`, so Apple's
    form post back is same-site here and the flow cookie (SameSite=Lax over HTTP) comes with it."""
    work = tempfile.mkdtemp()
    key = os.path.join(work, "AuthKey.p8")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
                   check=True, capture_output=True)
    apple = ["--team-id", "TEAM123456", "--key-id", "KEY1234567", "--private-key", key]
    stand_in, line = start([DEV_BINARY, "apple-stand-in", "--client-id", "com.example.web", "--sub", "000777.browser.0001",
                            "--email", "browser@privaterelay.appleid.com"] + apple)
    stand_in_port = line.strip().rsplit(":", 1)[1]
    port = free_port()
    origin = f"http://localhost:{port}"
    server, _ = start([BINARY, "serve", "--port", str(port), "--rp-id", "localhost", "--origin", origin,
                       "--db", f"sqlite:{os.path.join(work, 'apple.sqlite')}", "--log-level", "warning",
                       "--apple-services-id", "com.example.web", "--apple-redirect-uri", origin + "/apple/web/callback",
                       "--apple-team-id", "TEAM123456", "--apple-key-id", "KEY1234567", "--apple-private-key", key,
                       "--apple-base-url", f"http://localhost:{stand_in_port}"])
    yield origin
    for proc in (server, stand_in):
        proc.terminate()
        proc.wait(timeout=10)


SESSION = """
const done = arguments[0];
fetch('/demo/session', { credentials: 'same-origin' }).then(r => r.json()).then(done, e => done({ error: String(e) }));
"""


def wait_for(predicate, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def test_sign_in_with_apple_button_web_flow_through_the_stand_in(apple_server, driver):
    driver.delete_all_cookies()
    driver.get(apple_server + "/")
    button = driver.find_element("id", "apple")
    assert wait_for(lambda: button.is_displayed()), "the Sign in with Apple button is not shown"
    assert driver.execute_async_script(SESSION)["user"] is None
    # The button: /apple/web/start → the stand-in's /auth/authorize → its form post to
    # /apple/web/callback (code exchanged, token and state checked) → 303 to /, signed in.
    button.click()
    assert wait_for(lambda: driver.current_url.rstrip("/") == apple_server and driver.find_element("id", "who").text), \
        (driver.current_url, driver.page_source[:500])
    session = driver.execute_async_script(SESSION)
    assert session["user"], session
    assert driver.find_element("id", "who").text == session["user"]
    assert not driver.find_element("id", "apple").is_displayed()
    # The Apple ID is listed under "Linked sign-ins", with an Unlink button (refused while it is
    # the account's only way in; tested in AppleFlowTests.unlinkIdentity).
    assert wait_for(lambda: driver.find_element("id", "linked").is_displayed()), "linked sign-ins are not shown"
    items = driver.find_elements("css selector", "#identities li.identity")
    assert len(items) == 1 and "browser@privaterelay.appleid.com" in items[0].text, [i.text for i in items]
    assert items[0].find_element("css selector", "button.unlink").is_displayed()
    # Signed in without a passkey: the page asks the browser, quietly, to create one (conditional
    # create), with options the server issued for a conditional create of this signed-in account.
    # Chromium keeps such a request pending until its password manager offers it, which a test
    # profile never does; the server's side (no user presence needed, for this session only) is
    # tested in LifecycleTests.conditionalCreate.
    upgrade = wait_for(lambda: driver.execute_script("return upgrade && upgrade.attempted && upgrade.options ? {...upgrade} : null"))
    assert upgrade and upgrade.get("attempted") and upgrade.get("options") and not upgrade.get("error"), upgrade
    # A callback with a state this server never issued (or already used) signs nobody in.
    forged = driver.execute_async_script("""
const done = arguments[0];
fetch('/apple/web/callback', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
  body: 'code=x&id_token=x&state=replayed', redirect: 'manual'}).then(r => done(r.status), e => done(String(e)));
""")
    assert forged not in (200, 303, 0), forged
