public import WebAuthnCore
public import WebAuthnMetadata
package import _WebAuthnEncoding
package import _WebAuthnCrypto

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
        <h1>Passkeys and security keys</h1>
        <p>Register a passkey or a security key with a user name, then sign in with or without the name.</p>
        <div class="row">
          <input id="username" name="username" autocomplete="username webauthn" placeholder="user name">
          <button id="register">Register</button>
          <button id="signin">Sign in</button>
          <button id="signin-discoverable">Sign in without a name</button>
          <a id="apple" href="/apple/web/start" hidden>Sign in with Apple</a>
        </div>
        <div id="status">Ready.</div>
        <section id="account" hidden>
          <h2>Signed in as <span id="who"></span> <button id="add-passkey">Add a passkey</button> <button id="logout">Sign out</button></h2>
          <table><thead><tr><th>Authenticator</th><th>AAGUID</th><th>Backup</th><th>Counter</th><th>Last used</th><th></th></tr></thead>
          <tbody id="credentials"></tbody></table>
        </section>
        <script src="/demo.js"></script>
        </body>
        </html>
        """#

    static let css = #"""
          body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
          h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
          input, button { font: inherit; padding: .45rem .7rem; } input { width: 16rem; }
          button { cursor: pointer; } .row { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; }
          #status { margin: 1rem 0; padding: .6rem .8rem; border-radius: .3rem; background: #f2f2f2; white-space: pre-wrap; }
          #status.ok { background: #e6f4ea; } #status.error { background: #fde8e8; }
          table { border-collapse: collapse; width: 100%; font-size: .9rem; } th, td { text-align: left; padding: .35rem; border-bottom: 1px solid #ddd; }
          code { font-size: .8rem; }
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
        async function post(path, body) {
          const r = await fetch(path, { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
          const json = await r.json();
          if (json.status !== 'ok') throw new Error(json.errorMessage || ('HTTP ' + r.status));
          return json;
        }
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
        async function register(signedInName) {
          const username = signedInName || $('username').value.trim();
          if (!username) return say('Type a user name first.', 'error');
          abortConditional();
          try {
            const options = await post('/attestation/options', { username, displayName: username, attestation: 'direct',
              authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' } });
            const credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
            const result = await post('/attestation/result', toJSON(credential));
            say(`Registered (${result.fmt}, ${result.attestationType}${result.trusted ? ', trusted' : ''}).`, 'ok');
            await refresh();
          } catch (e) { say('Registration failed: ' + e.message, 'error'); }
        }
        async function signIn(withName, mediation) {
          const username = withName ? $('username').value.trim() : undefined;
          if (withName && !username) return say('Type a user name, or sign in without one.', 'error');
          if (!mediation) abortConditional();
          try {
            const options = await post('/assertion/options', mediation ? { mediation } : { username, userVerification: 'preferred' });
            let request = { publicKey: requestOptions(options) };
            if (mediation) { conditional = new AbortController(); request = { ...request, mediation, signal: conditional.signal }; }
            const credential = await navigator.credentials.get(request);
            conditional = null;
            await post('/assertion/result', toJSON(credential));
            say('Signed in.', 'ok');
            await refresh();
          } catch (e) { if (!mediation) say('Sign-in failed: ' + e.message, 'error'); }
        }
        async function refresh() {
          const s = await (await fetch('/demo/session', { credentials: 'same-origin' })).json();
          $('account').hidden = !s.user;
          $('apple').hidden = !s.apple || !!s.user;
          signedInAs = s.user;
          if (!s.user) return;
          $('who').textContent = s.user;
          const list = await (await fetch('/demo/credentials', { credentials: 'same-origin' })).json();
          $('credentials').replaceChildren(...list.credentials.map(c => {
            const tr = document.createElement('tr');
            const cells = [c.authenticator, c.aaguid, c.backupEligible ? (c.backedUp ? 'synced' : 'eligible') : 'device-bound', String(c.signCount), c.lastUsedAt || 'never'];
            for (const text of cells) { const td = document.createElement('td'); td.textContent = text; tr.append(td); }
            const td = document.createElement('td'); const b = document.createElement('button'); b.textContent = 'Delete';
            b.onclick = async () => { await fetch('/demo/credentials/' + encodeURIComponent(c.id), { method: 'DELETE', credentials: 'same-origin' }); await refresh(); };
            td.append(b); tr.append(td); return tr;
          }));
        }
        let signedInAs = null;
        $('register').onclick = () => register();
        // Adding a passkey to the account needs its session: the server refuses a stranger.
        $('add-passkey').onclick = () => register(signedInAs);
        $('signin').onclick = () => signIn(true);
        $('signin-discoverable').onclick = () => signIn(false);
        $('logout').onclick = async () => {
          await fetch('/demo/logout', { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: '{}' });
          await refresh(); say('Signed out.');
        };
        if (window.PublicKeyCredential && PublicKeyCredential.isConditionalMediationAvailable) {
          PublicKeyCredential.isConditionalMediationAvailable().then(ok => { if (ok) signIn(false, 'conditional'); });
        }
        refresh();
        """#
}
