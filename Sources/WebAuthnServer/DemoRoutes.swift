internal import Foundation
public import Hummingbird
internal import WebAuthnCore
internal import Logging
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension WebAuthnRoutes {
    /// The demo page (`/`, `/demo.js`, `/demo.css`) and the account API under `/demo/`
    /// (``accountRoutes(context:)``). Not part of ``routes(context:)``: a host app mounts it only
    /// if it wants it, at the root, with ``routes(context:)`` at the root too (the page calls the
    /// ceremony routes at `/attestation/…` and `/assertion/…`). `Context`: see ``add(to:atPath:)``.
    public func demoRoutes<Context: RemoteAddressRequestContext>(context: Context.Type = Context.self) -> RouteCollection<Context> {
        let router = RouteCollection(context: Context.self)
        // Added before the page's middleware: the account routes carry their own.
        router.addRoutes(accountRoutes(context: Context.self), atPath: "/demo")
        router.add(middleware: SecurityHeadersMiddleware<Context>(secure: configuration.secureCookies))
        router.get("/") { _, _ in Self.file(DemoPage.html, type: "text/html; charset=utf-8") }
        router.get("/demo.js") { _, _ in Self.file(DemoPage.script, type: "text/javascript; charset=utf-8") }
        router.get("/demo.css") { _, _ in Self.file(DemoPage.css, type: "text/css; charset=utf-8") }
        return router
    }

    /// The account API a settings page needs, for a host app to mount where it likes (the demo
    /// mounts it at `/demo`; `app.addRoutes(webauthn.accountRoutes(), atPath: "/me")` gives
    /// `/me/session`, ...). Everything but `GET /session` needs a signed-in session
    /// (``ServerConfiguration/signedInAccount`` first, then the passkey session); deletions need a
    /// recent verification (``requireRecentVerification(_:)``); changes need a JSON body.
    ///
    /// | Route | Does |
    /// |---|---|
    /// | `GET /session` | who is signed in: `user`, `displayName`, `recentlyVerified`; `{"user": null}` when nobody |
    /// | `GET /credentials` | the account's passkeys, named for people (provider, icon, synced, last use) |
    /// | `PATCH /credentials/:id` | `{"name": …}`: the owner's name for one (null clears it) |
    /// | `DELETE /credentials/:id` | deletes one (not the last way in: `last_credential`), ends the other sessions, answers the signal for the provider |
    /// | `GET /identities` | the account's linked identities (Sign in with Apple): `id`, `provider`, `email`, `privateEmail`, `linkedAt` |
    /// | `DELETE /identities/:id` | unlinks one (not the last way in: `last_credential`), revokes its refresh token at Apple, ends the other sessions |
    /// | `PATCH /account` | `{"displayName": …}` |
    /// | `DELETE /account` | deletes the account, its passkeys and identities, and its sessions |
    /// | `POST /logout` | signs this session out, or with `{"everywhere": true}` every session of the account (after a recent verification) |
    public func accountRoutes<Context: RemoteAddressRequestContext>(context: Context.Type = Context.self) -> RouteCollection<Context> {
        let router = RouteCollection(context: Context.self)
        router.add(middleware: SecurityHeadersMiddleware<Context>(secure: configuration.secureCookies))
        router.get("/session") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let token = sessions.token(request)
                guard let handle = try await signedInAccount(request, token: token),
                    let account = try await accounts.account(handle: handle)
                else {
                    var anonymous: JSONObject = ["user": .null]
                    anonymous["apple"] = .bool(appleWebFlow)
                    return HTTP.ok(anonymous)
                }
                var payload: JSONObject = ["user": .string(account.name), "displayName": .string(account.displayName)]
                payload["apple"] = .bool(appleWebFlow)
                let session = try await sessions.signedIn(token, now: now)
                payload["recentlyVerified"] = .bool(session.map { (try? requireRecent($0)) != nil } ?? false)
                payload["providerList"] = .number(Double(configuration.passkeyProviders.list.providers.count))
                return HTTP.ok(payload)
            }
        }
        router.get("/credentials") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                let iso = ISO8601DateFormatter()
                let names = providerNames
                let list = try await engine.credentials.credentials(forUser: handle).map { c -> JSONValue in
                    let label = names.label(for: c)
                    var o: JSONObject = [
                        "id": .string(Base64URL.encode(c.id)),
                        "name": c.name.map(JSONValue.string) ?? .null,
                        "provider": .string(label.provider),
                        "providerSource": .string(label.source.rawValue),
                        "aaguid": .string(c.aaguid.description),
                        "format": .string(c.attestationFormat.rawValue),
                        // Synced (a multi-device passkey) or bound to one device.
                        "synced": .bool(c.backupEligible),
                        "backupEligible": .bool(c.backupEligible),
                        "backedUp": .bool(c.backupState),
                        "discoverable": c.properties.discoverable.map(JSONValue.bool) ?? .null,
                        "signCount": .number(Double(c.signCount)),
                        "createdAt": .string(iso.string(from: c.createdAt)),
                        "lastUsedAt": c.lastUsedAt.map { .string(iso.string(from: $0)) } ?? .null,
                        "transports": .array(c.transports.map { .string($0.rawValue) }),
                    ]
                    o["iconLight"] = label.iconLight.map(JSONValue.string) ?? .null
                    o["iconDark"] = label.iconDark.map(JSONValue.string) ?? .null
                    o["prf"] = c.properties.prfEnabled.map(JSONValue.bool) ?? .null
                    o["flag"] = c.flag.map { .object(["status": .string($0.status.rawValue), "reason": .string($0.reason)]) } ?? .null
                    return .object(o)
                }
                return HTTP.ok(["credentials": .array(list)])
            }
        }
        router.patch("/credentials/:id") { request, context in
            await handle(request, context) {
                try HTTP.requireJSON(request)
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                try throttleChanges(handle, request, context)
                let id = try credentialID(context)
                let body = try RequestMembers(await HTTP.body(request, limit: 4096))
                // A string names it; "" or null clears the name; anything else is refused.
                let member = body.object["name"] ?? .null
                guard member.isNull || member.stringValue != nil else {
                    throw WebAuthnError(.credentialNameInvalid, "name must be a string (or null to clear it)")
                }
                let raw = member.stringValue ?? ""
                let name: String?
                if raw.isEmpty {
                    name = nil
                } else {
                    do throws(WebAuthnError) { name = try UserName.normalize(displayName: raw) } catch {
                        throw WebAuthnError(.credentialNameInvalid, "the name must be 1 to 64 characters without control characters: \(error.message)")
                    }
                }
                guard try await engine.credentials.rename(id: id, ofUser: handle, to: name) else {
                    throw WebAuthnError(.credentialUnknown, "you have no such credential")
                }
                audit("credential_renamed", request, context, ["account": .string(Audit.hash(handle)), "credential": .string(Audit.hash(id))])
                return HTTP.ok(["name": name.map(JSONValue.string) ?? .null])
            }
        }
        router.delete("/credentials/:id") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                try await HTTP.requireReadable(request)
                let session = try await requireRecentSession(request)
                let handle = session.userHandle
                let id = try credentialID(context)
                try await deleteCredential(id, of: handle)
                // Whoever signed in elsewhere goes (red team, fifth pass: an intruder's passkey
                // deleted, its session still signed in and finished an addition it had started).
                let ended = try await sessions.store.deleteSessions(userHandle: handle, except: session.idHash)
                audit(
                    "credential_deleted", request, context,
                    ["account": .string(Audit.hash(handle)), "credential": .string(Audit.hash(id)), "sessions_ended": .stringConvertible(ended)])
                // The provider should stop offering it: the account's credentials as they are now.
                let signal = try await engine.allAcceptedCredentialsSignal(userHandle: handle)
                return HTTP.ok(["signal": signal.payload(rpId: engine.relyingParty.id), "otherSessionsEnded": .number(Double(ended))])
            }
        }
        addIdentityRoutes(to: router)
        router.patch("/account") { request, context in
            await handle(request, context) {
                try HTTP.requireJSON(request)
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                try throttleChanges(handle, request, context)
                let body = try RequestMembers(await HTTP.body(request, limit: 4096))
                let displayName = try UserName.normalize(displayName: body.string("displayName") ?? "")
                guard try await accounts.setDisplayName(displayName, handle: handle), let account = try await accounts.account(handle: handle) else {
                    throw WebAuthnError(.signInRequired, "sign in first")
                }
                audit("account_renamed", request, context, ["account": .string(Audit.hash(handle))])
                // The provider should show the new name with the account's passkeys.
                return HTTP.ok([
                    "displayName": .string(account.displayName),
                    "signal": CredentialSignal.currentUserDetails(user: account).payload(rpId: engine.relyingParty.id),
                ])
            }
        }
        router.delete("/account") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                try await HTTP.requireReadable(request)
                let handle = try await requireRecentVerification(request)
                let unrevoked = try await deleteAccount(handle)
                var event: Logger.Metadata = ["account": .string(Audit.hash(handle))]
                // Apple refresh tokens sealed under another server secret: not revoked at Apple.
                if unrevoked > 0 { event["unrevokedAppleTokens"] = .stringConvertible(unrevoked) }
                audit("account_deleted", request, context, event)
                // Every passkey of the account is gone: the provider may drop them all.
                var response = HTTP.ok([
                    "signal": CredentialSignal.allAcceptedCredentials(userHandle: handle, credentialIds: []).payload(rpId: engine.relyingParty.id)
                ])
                response.setCookie(sessions.expiredCookie)
                return response
            }
        }
        router.post("/logout") { request, context in
            await handle(request, context) {
                // JSON only: a form on a sibling site (same-site, so SameSite=Strict lets the cookie through) cannot sign the user out.
                try HTTP.requireJSON(request)
                try throttle(request, context)
                // An empty body signs this session out, as before the option existed; one that cannot
                // be read is refused rather than taken for a plain sign-out (red team, sixth pass).
                let body = try await HTTP.body(request, limit: 1024, whenEmpty: [:])
                guard body.objectValue != nil, body["everywhere"].map({ $0.boolValue != nil }) ?? true else {
                    throw WebAuthnError(.requestMalformed, "the body is an object whose \"everywhere\", if present, is true or false")
                }
                let token = sessions.token(request)
                let signedIn = try await sessions.signedIn(token, now: now)
                var response = HTTP.ok()
                // `{"everywhere": true}`: every session of the account ends, on every device (and
                // the ceremonies pending under them), as after a lost phone or a stolen cookie.
                if body["everywhere"]?.boolValue == true, let signedIn {
                    // Only after a recent verification: a stolen cookie that has not verified the
                    // user must not sign the owner out of every device.
                    try requireRecent(signedIn)
                    let ended = try await sessions.store.deleteSessions(userHandle: signedIn.userHandle)
                    audit("signed_out", request, context, ["account": .string(Audit.hash(signedIn.userHandle)), "sessions_ended": .stringConvertible(ended)])
                    response = HTTP.ok(["sessionsEnded": .number(Double(ended))])
                } else {
                    try await sessions.signOut(token)
                    // With its account, as every change to one: an event without one counts as a
                    // stranger's refusal, and a flood of those from many addresses hid it (red
                    // team, thirty-second pass re-check).
                    if let signedIn { audit("signed_out", request, context, ["account": .string(Audit.hash(signedIn.userHandle))]) }
                }
                response.setCookie(sessions.expiredCookie)
                return response
            }
        }
        return router
    }

    /// Whether the demo page shows "Sign in with Apple" (the web flow is configured).
    var appleWebFlow: Bool { configuration.apple?.webFlow ?? false }

    static func file(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// How credentials are named: FIDO metadata, then the community provider list, then "Passkey" / "Security key".
    var providerNames: ProviderNames {
        let anchors = engine.trustAnchors  // the metadata installed now
        return ProviderNames(metadata: { anchors.metadataEntry(for: $0) }, list: configuration.passkeyProviders.list)
    }

    /// Deletes one of the account's credentials, unless it is the account's last way to sign in
    /// (no other credential, no linked identity): `last_credential`. Red team: deleting the last
    /// passkey left the account, its name taken, with nobody able to sign in to it. A store that
    /// keeps the accounts with the credentials decides in one transaction, for every process
    /// sharing it (red team: two processes deleted an account's last two at once); with other
    /// stores, deletions of one account's credentials run one at a time in this process.
    func deleteCredential(_ id: [UInt8], of handle: [UInt8]) async throws {
        let unknown = WebAuthnError(.credentialUnknown, "you have no such credential")
        if let guarding = accounts as? any AccountWayInGuarding, (accounts as AnyObject) === (engine.credentials as AnyObject) {
            switch try await guarding.deleteCredential(id: id, ofAccount: handle) {
            case .deleted: return
            case .lastWayIn: throw Self.lastWayIn
            case .notFound: throw unknown
            }
        }
        try await credentialDeletions.run(handle) { () async throws(WebAuthnError) in
            do {
                let held = try await engine.credentials.credentials(forUser: handle)
                guard held.contains(where: { $0.id == id }) else { throw unknown }
                if held.count == 1, try await configuration.apple?.identities.identities(forUser: handle).isEmpty ?? true { throw Self.lastWayIn }
                _ = try await engine.credentials.delete(id: id)
            } catch let error as WebAuthnError {
                throw error
            } catch {
                throw WebAuthnError(.storageFailure, "\(error)")
            }
        }
    }

    static let lastWayIn = WebAuthnError(
        .lastCredential, "this passkey is the only way to sign in to the account: add another first, or delete the account")

    /// The `:id` of a credential route, decoded (at most 2 KiB of text).
    func credentialID<Context: RequestContext>(_ context: Context) throws -> [UInt8] {
        guard let text = context.parameters.get("id"), text.utf8.count <= 2048, let id = Base64URL.decode(text), !id.isEmpty else {
            throw WebAuthnError(.credentialUnknown, "you have no such credential")
        }
        return id
    }

    /// The signed-in account's handle, or `sign_in_required`.
    func requireSignedIn(_ request: Request) async throws -> [UInt8] {
        guard let handle = try await signedInAccount(request, token: sessions.token(request)) else {
            throw WebAuthnError(.signInRequired, "sign in first")
        }
        return handle
    }
}
