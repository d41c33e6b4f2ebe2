internal import WebAuthnCore
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The demo page: plain HTML, a script and a style sheet served from their
/// own paths (the Content-Security-Policy allows no inline script or style),
/// no build step. It drives the same conformance API endpoints any client would.
enum DemoPage {
    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>WebAuthn engine demo</title>
        <link rel="stylesheet" href="/demo.css">
        </head>
        <body>
        <header><span class="logo">◆</span> Passkeys demo</header>
        <main>
        <section id="welcome" class="card">
          <h1>Sign in</h1>
          <p class="muted">Use a passkey or a security key. New here? Pick a user name and register.</p>
          <div class="row">
            <input id="username" name="username" autocomplete="username webauthn" placeholder="user name">
            <button id="signin" class="primary">Sign in</button>
            <button id="register">Register</button>
          </div>
          <div class="row">
            <button id="signin-discoverable" class="link">Sign in without a user name</button>
            <a id="apple" class="apple" href="/apple/web/start" hidden> Sign in with Apple</a>
          </div>
        </section>
        <div id="status" role="status">Ready.</div>
        <section id="account" class="card" hidden>
          <div class="account-head">
            <div>
              <h2>Signed in as <span id="who"></span></h2>
              <p class="muted"><span id="display-name"></span> <button id="edit-display-name" class="link">Change display name</button></p>
            </div>
            <div class="row"><button id="add-passkey" class="primary">Add a passkey</button> <button id="logout">Sign out</button> <button id="logout-everywhere" class="link">Sign out everywhere</button></div>
          </div>
          <h3>Your passkeys and security keys</h3>
          <ul id="credentials" class="credentials"></ul>
          <p id="no-credentials" class="muted" hidden>No passkey yet. Add one to sign in without a password next time.</p>
          <div id="linked" hidden><h3>Linked sign-ins</h3><ul id="identities" class="credentials"></ul></div>
          <details class="danger-zone"><summary>Delete account</summary>
            <p class="muted">Deletes the account, its passkeys and linked sign-ins. You will be asked to confirm it is you.</p>
            <button id="delete-account" class="danger">Delete my account</button>
          </details>
        </section>
        <dialog id="confirm">
          <form method="dialog">
            <p id="confirm-text"></p>
            <div class="row end"><button value="cancel">Cancel</button> <button id="confirm-ok" value="ok" class="danger">Delete</button></div>
          </form>
        </dialog>
        <dialog id="rename">
          <form method="dialog">
            <label for="rename-input" id="rename-label">Name</label>
            <input id="rename-input" maxlength="64">
            <div class="row end"><button value="cancel">Cancel</button> <button id="rename-ok" value="ok" class="primary">Save</button></div>
          </form>
        </dialog>
        </main>
        <script src="/demo.js"></script>
        </body>
        </html>
        """#

    static let css = #"""
          :root { --fg: #1c1e21; --muted: #65676b; --line: #e4e6eb; --accent: #1a56db; --danger: #c0262d; --bg: #f5f6f8; }
          * { box-sizing: border-box; }
          body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: var(--fg); background: var(--bg); }
          header { background: #fff; border-bottom: 1px solid var(--line); padding: .9rem 1.5rem; font-weight: 600; }
          .logo { color: var(--accent); }
          main { max-width: 44rem; margin: 2rem auto; padding: 0 1rem; }
          .card { background: #fff; border: 1px solid var(--line); border-radius: .75rem; padding: 1.25rem 1.5rem; margin-bottom: 1rem; }
          h1 { font-size: 1.35rem; margin: 0 0 .25rem; } h2 { font-size: 1.1rem; margin: 0; } h3 { font-size: .95rem; margin: 1.5rem 0 .5rem; }
          .muted { color: var(--muted); font-size: .9rem; margin: .25rem 0; }
          .row { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; margin-top: .75rem; } .row.end { justify-content: flex-end; }
          input { font: inherit; padding: .5rem .7rem; border: 1px solid #ccd0d5; border-radius: .5rem; min-width: 14rem; }
          button, .apple { font: inherit; font-size: .92rem; padding: .45rem .9rem; border-radius: .5rem; border: 1px solid #ccd0d5; background: #fff; cursor: pointer; color: var(--fg); text-decoration: none; }
          button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
          button.danger { background: #fff; border-color: var(--danger); color: var(--danger); }
          button.link { border: none; background: none; color: var(--accent); padding: .2rem 0; }
          .apple { background: #000; color: #fff; border-color: #000; }
          #status { margin: 0 0 1rem; padding: .6rem .9rem; border-radius: .5rem; background: #fff; border: 1px solid var(--line); white-space: pre-wrap; font-size: .9rem; }
          #status.ok { background: #e7f5ec; border-color: #b7e0c4; } #status.error { background: #fdecec; border-color: #f3c1c1; }
          .account-head { display: flex; justify-content: space-between; gap: 1rem; flex-wrap: wrap; align-items: flex-start; }
          .account-head .row { margin-top: 0; }
          ul.credentials { list-style: none; padding: 0; margin: 0; }
          .credential { display: grid; grid-template-columns: 2.5rem 1fr auto; gap: .9rem; align-items: center; padding: .8rem 0; border-top: 1px solid var(--line); }
          .credential:first-child { border-top: none; }
          .credential img, .credential .glyph { width: 2.25rem; height: 2.25rem; border-radius: .5rem; }
          .credential .glyph { display: grid; place-items: center; background: #eef2ff; color: var(--accent); font-weight: 700; }
          .credential .title { font-weight: 600; } .credential .provider { color: var(--muted); font-weight: 400; }
          .credential .facts { color: var(--muted); font-size: .82rem; margin-top: .15rem; }
          .badge { display: inline-block; font-size: .72rem; padding: .05rem .45rem; border-radius: 1rem; background: #eef2ff; color: #3046a8; margin-right: .3rem; }
          .badge.device { background: #f1f1f1; color: #444; }
          .badge.flag { background: #fdecec; color: var(--danger); }
          .danger-zone { margin-top: 1.5rem; } .danger-zone summary { cursor: pointer; color: var(--danger); font-size: .9rem; }
          dialog { border: 1px solid var(--line); border-radius: .75rem; padding: 1.25rem; max-width: 26rem; }
          dialog::backdrop { background: rgba(0,0,0,.3); }
          dialog input { width: 100%; margin-top: .4rem; }
        """#

    static let script = #"""
        const $ = (id) => document.getElementById(id);
        const b64 = {
          encode(buf) { return btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''); },
          decode(s) { s = s.replace(/-/g, '+').replace(/_/g, '/'); while (s.length % 4) s += '='; return Uint8Array.from(atob(s), c => c.charCodeAt(0)).buffer; },
        };
        // A conditional (autofill) request stays pending until used; any other
        // ceremony must abort it first, or the browser refuses with "already pending".
        let conditional = null;
        function abortConditional() { if (conditional) { conditional.abort(); conditional = null; } }
        function say(text, kind) { const s = $('status'); s.textContent = text; s.className = kind || ''; }

        // The Signals API (WebAuthn L3 §5.1.10): the server says which call keeps the user's
        // passkey provider in step; the page makes it where the browser has it.
        const signals = [];
        async function sendSignal(signal) {
          const method = window.PublicKeyCredential && PublicKeyCredential[signal.method];
          const entry = { method: signal.method, supported: typeof method === 'function' };
          signals.push(entry);
          if (!entry.supported) return;
          try { await method.call(PublicKeyCredential, signal.options); entry.sent = true; } catch (e) { entry.error = String(e && e.message || e); }
        }
        async function api(path, method, body) {
          const init = { method, credentials: 'same-origin', headers: {} };
          if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
          const r = await fetch(path, init);
          const json = await r.json();
          if (json.signal) await sendSignal(json.signal);
          if (json.status !== 'ok') {
            const e = new Error(json.errorMessage || ('HTTP ' + r.status));
            e.code = (json.errorMessage || '').split(':')[0];
            throw e;
          }
          return json;
        }
        const post = (path, body) => api(path, 'POST', body);
        function creationOptions(o) {
          if (PublicKeyCredential.parseCreationOptionsFromJSON) return PublicKeyCredential.parseCreationOptionsFromJSON(o);
          return { ...o, challenge: b64.decode(o.challenge), user: { ...o.user, id: b64.decode(o.user.id) },
                   excludeCredentials: (o.excludeCredentials || []).map(c => ({ ...c, id: b64.decode(c.id) })) };
        }
        function requestOptions(o) {
          if (PublicKeyCredential.parseRequestOptionsFromJSON) return PublicKeyCredential.parseRequestOptionsFromJSON(o);
          return { ...o, challenge: b64.decode(o.challenge), allowCredentials: (o.allowCredentials || []).map(c => ({ ...c, id: b64.decode(c.id) })) };
        }
        function toJSON(c) {
          if (c.toJSON) { try { return c.toJSON(); } catch (e) {} }
          const r = c.response, out = { id: c.id, rawId: b64.encode(c.rawId), type: c.type, clientExtensionResults: c.getClientExtensionResults(),
            authenticatorAttachment: c.authenticatorAttachment, response: { clientDataJSON: b64.encode(r.clientDataJSON) } };
          if (r.attestationObject) { out.response.attestationObject = b64.encode(r.attestationObject); out.response.transports = r.getTransports ? r.getTransports() : []; }
          else { out.response.authenticatorData = b64.encode(r.authenticatorData); out.response.signature = b64.encode(r.signature);
                 out.response.userHandle = r.userHandle ? b64.encode(r.userHandle) : null; }
          return out;
        }

        // Step-up: a sensitive action the server refuses with reauthentication_required is
        // retried once after a fresh assertion with user verification (the server side of an
        // app's biometric re-check).
        let stepUps = 0;
        async function reauthenticate() {
          stepUps++;
          abortConditional();
          say('Confirm it is you with your passkey…');
          const options = await post('/reauthentication/options', {});
          const credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
          await post('/reauthentication/result', toJSON(credential));
        }
        async function withStepUp(action) {
          try { return await action(); } catch (e) {
            if (e.code !== 'reauthentication_required') throw e;
            await reauthenticate();
            return await action();
          }
        }

        // Ask for the credential's properties (credProps) and a PRF-capable credential; the server records what came back.
        const registrationExtensions = { credProps: true, prf: {} };
        async function register(signedInName) {
          const username = signedInName || $('username').value.trim();
          if (!username) return say('Type a user name first.', 'error');
          abortConditional();
          try {
            const result = await withStepUp(async () => {
              const options = await post('/attestation/options', { username, displayName: username, attestation: 'direct',
                authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' }, extensions: registrationExtensions });
              const credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
              return await post('/attestation/result', toJSON(credential));
            });
            say(`Registered (${result.fmt}, ${result.attestationType}${result.trusted ? ', trusted' : ''}).`, 'ok');
            await refresh();
          } catch (e) { say('Registration failed: ' + e.message, 'error'); }
        }
        // Conditional create (automatic passkey upgrade): an account signed in without a passkey
        // (Sign in with Apple, say) is offered one quietly, where the browser supports it.
        let upgrade = null;
        async function upgradeQuietly(name) {
          if (upgrade) return upgrade;
          upgrade = { attempted: false };
          if (!window.PublicKeyCredential || !PublicKeyCredential.getClientCapabilities) return upgrade;
          const caps = await PublicKeyCredential.getClientCapabilities().catch(() => ({}));
          if (!caps.conditionalCreate) { upgrade.unsupported = true; return upgrade; }
          upgrade.attempted = true;
          abortConditional();
          const controller = new AbortController();
          conditional = controller;
          try {
            const options = await post('/attestation/options', { username: name, mediation: 'conditional', extensions: registrationExtensions,
              authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' } });
            upgrade.options = true;
            // The browser may keep a conditional create pending (until the password manager offers it):
            // like a conditional get, any other ceremony aborts it first.
            if (controller.signal.aborted) return upgrade;
            const credential = await navigator.credentials.create({ publicKey: creationOptions(options), mediation: 'conditional', signal: controller.signal });
            if (conditional === controller) conditional = null;
            await post('/attestation/result', toJSON(credential));
            upgrade.created = true;
            say('A passkey was added to your account.', 'ok');
            await refresh();
          } catch (e) { upgrade.error = String(e && e.message || e); }
          return upgrade;
        }
        async function signIn(withName, mediation) {
          const username = withName ? $('username').value.trim() : undefined;
          if (withName && !username) return say('Type a user name, or sign in without one.', 'error');
          if (!mediation) abortConditional();
          // A conditional request claims its controller before it awaits anything, so that a
          // ceremony started meanwhile can abort it (else it would stay pending behind that one).
          const controller = mediation ? new AbortController() : null;
          if (controller) conditional = controller;
          try {
            const options = await post('/assertion/options', mediation ? { mediation } : { username, userVerification: 'preferred' });
            if (controller && controller.signal.aborted) return;
            let request = { publicKey: requestOptions(options) };
            if (controller) request = { ...request, mediation, signal: controller.signal };
            const credential = await navigator.credentials.get(request);
            if (controller && conditional === controller) conditional = null;
            await post('/assertion/result', toJSON(credential));
            say('Signed in.', 'ok');
            await refresh();
          } catch (e) { if (!mediation) say('Sign-in failed: ' + e.message, 'error'); }
        }

        function when(iso) { return iso ? new Date(iso).toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' }) : 'never'; }
        function askConfirm(text, ok) {
          $('confirm-text').textContent = text; $('confirm-ok').textContent = ok;
          return new Promise(resolve => { $('confirm').onclose = () => resolve($('confirm').returnValue === 'ok'); $('confirm').showModal(); });
        }
        function askName(label, value) {
          $('rename-label').textContent = label; $('rename-input').value = value || '';
          return new Promise(resolve => { $('rename').onclose = () => resolve($('rename').returnValue === 'ok' ? $('rename-input').value : null); $('rename').showModal(); });
        }
        function credentialItem(c) {
          const li = document.createElement('li'); li.className = 'credential'; li.dataset.id = c.id;
          let icon;
          if (c.iconLight) { icon = document.createElement('img'); icon.src = c.iconLight; icon.alt = ''; }
          else { icon = document.createElement('div'); icon.className = 'glyph'; icon.textContent = c.provider === 'Security key' ? '⚿' : '●'; }
          const body = document.createElement('div');
          const title = document.createElement('div'); title.className = 'title';
          title.append(document.createTextNode(c.name || c.provider));
          if (c.name) { const p = document.createElement('span'); p.className = 'provider'; p.textContent = ' · ' + c.provider; title.append(p); }
          const badges = document.createElement('div');
          const badge = (text, cls) => { const b = document.createElement('span'); b.className = 'badge' + (cls ? ' ' + cls : ''); b.textContent = text; badges.append(b); };
          badge(c.synced ? 'Synced' : 'This device only', c.synced ? '' : 'device');
          if (c.discoverable === true) badge('Sign in without a user name');
          if (c.prf === true) badge('PRF');
          if (c.flag) { badge('Reported compromised', 'flag'); badges.lastChild.title = c.flag.reason; }
          const facts = document.createElement('div'); facts.className = 'facts';
          facts.textContent = `Added ${when(c.createdAt)} · last used ${when(c.lastUsedAt)}` + (c.transports.length ? ' · ' + c.transports.join(', ') : '');
          body.append(title, badges, facts);
          const actions = document.createElement('div'); actions.className = 'row';
          const rename = document.createElement('button'); rename.textContent = 'Rename'; rename.className = 'rename';
          rename.onclick = async () => {
            const name = await askName('Name this passkey', c.name);
            if (name === null) return;
            try { await api('/demo/credentials/' + encodeURIComponent(c.id), 'PATCH', { name }); say('Renamed.', 'ok'); await refresh(); }
            catch (e) { say('Rename failed: ' + e.message, 'error'); }
          };
          const remove = document.createElement('button'); remove.textContent = 'Delete'; remove.className = 'danger delete';
          remove.onclick = async () => {
            if (!await askConfirm(`Delete “${c.name || c.provider}”? You will no longer be able to sign in with it.`, 'Delete')) return;
            try { await withStepUp(() => api('/demo/credentials/' + encodeURIComponent(c.id), 'DELETE')); say('Deleted.', 'ok'); await refresh(); }
            catch (e) { say('Delete failed: ' + e.message, 'error'); }
          };
          actions.append(rename, remove);
          li.append(icon, body, actions);
          return li;
        }
        function identityItem(i) {
          const li = document.createElement('li'); li.className = 'credential identity'; li.dataset.id = i.id;
          const icon = document.createElement('div'); icon.className = 'glyph'; icon.textContent = '●';
          const body = document.createElement('div');
          const title = document.createElement('div'); title.className = 'title'; title.textContent = 'Sign in with Apple' + (i.email ? ' · ' + i.email : '');
          const facts = document.createElement('div'); facts.className = 'facts'; facts.textContent = `Linked ${when(i.linkedAt)}`;
          body.append(title, facts);
          const remove = document.createElement('button'); remove.textContent = 'Unlink'; remove.className = 'danger unlink';
          remove.onclick = async () => {
            if (!await askConfirm('Unlink this Apple ID? It will no longer sign in to this account.', 'Unlink')) return;
            try { await withStepUp(() => api('/demo/identities/' + encodeURIComponent(i.id), 'DELETE')); say('Unlinked.', 'ok'); await refresh(); }
            catch (e) { say('Unlink failed: ' + e.message, 'error'); }
          };
          const actions = document.createElement('div'); actions.className = 'row'; actions.append(remove);
          li.append(icon, body, actions);
          return li;
        }
        async function refresh() {
          const s = await (await fetch('/demo/session', { credentials: 'same-origin' })).json();
          $('account').hidden = !s.user;
          $('welcome').hidden = !!s.user;
          $('apple').hidden = !s.apple || !!s.user;
          signedInAs = s.user;
          if (!s.user) { startAutofill(); return; }
          $('who').textContent = s.user;
          $('display-name').textContent = s.displayName && s.displayName !== s.user ? s.displayName : '';
          const list = await (await fetch('/demo/credentials', { credentials: 'same-origin' })).json();
          $('credentials').replaceChildren(...list.credentials.map(credentialItem));
          $('no-credentials').hidden = list.credentials.length > 0;
          if (list.credentials.length === 0) upgradeQuietly(s.user);
          const linked = await (await fetch('/demo/identities', { credentials: 'same-origin' })).json();
          $('identities').replaceChildren(...(linked.identities || []).map(identityItem));
          $('linked').hidden = !(linked.identities || []).length;
        }
        let signedInAs = null;
        $('register').onclick = () => register();
        // Adding a passkey to the account needs its session: the server refuses a stranger.
        $('add-passkey').onclick = () => register(signedInAs);
        $('signin').onclick = () => signIn(true);
        $('signin-discoverable').onclick = () => signIn(false);
        $('edit-display-name').onclick = async () => {
          const displayName = await askName('Display name', $('display-name').textContent || signedInAs);
          if (displayName === null) return;
          try { await api('/demo/account', 'PATCH', { displayName }); say('Display name changed.', 'ok'); await refresh(); }
          catch (e) { say('Change failed: ' + e.message, 'error'); }
        };
        $('delete-account').onclick = async () => {
          if (!await askConfirm('Delete your account and all its passkeys? This cannot be undone.', 'Delete account')) return;
          try { await withStepUp(() => api('/demo/account', 'DELETE')); say('Account deleted.', 'ok'); await refresh(); }
          catch (e) { say('Delete failed: ' + e.message, 'error'); }
        };
        $('logout').onclick = async () => {
          await post('/demo/logout', {});
          await refresh(); say('Signed out.');
        };
        $('logout-everywhere').onclick = async () => {
          try { await withStepUp(() => api('/demo/logout', 'POST', { everywhere: true })); await refresh(); say('Signed out on every device.'); }
          catch (e) { say('Sign-out failed: ' + e.message, 'error'); }
        };
        // Passkey autofill on the user name field, while signed out.
        async function startAutofill() {
          if (conditional || !window.PublicKeyCredential || !PublicKeyCredential.isConditionalMediationAvailable) return;
          if (await PublicKeyCredential.isConditionalMediationAvailable() && !signedInAs && !conditional) signIn(false, 'conditional');
        }
        refresh();
        """#
}
