public import Foundation
public import Hummingbird
public import WebAuthnCore
public import WebAuthnMetadata
package import _WebAuthnEncoding
package import _WebAuthnCrypto

extension WebAuthnRoutes {
    /// The demo page (`/`, `/demo.js`, `/demo.css`) and its small API under
    /// `/demo/`: who is signed in, their credentials, delete one, sign out.
    /// Everything but the page needs the signed-in session. Not part of
    /// ``routes(context:)``: a host app mounts it only if it wants it, at the
    /// root (the page calls the ceremony routes at `/attestation/…` and `/assertion/…`).
    public func demoRoutes<Context: RequestContext>(context: Context.Type = Context.self) -> RouteCollection<Context> {
        let router = RouteCollection(context: Context.self)
        router.add(middleware: SecurityHeadersMiddleware<Context>(secure: configuration.secureCookies))
        router.get("/") { _, _ in Self.file(DemoPage.html, type: "text/html; charset=utf-8") }
        router.get("/demo.js") { _, _ in Self.file(DemoPage.script, type: "text/javascript; charset=utf-8") }
        router.get("/demo.css") { _, _ in Self.file(DemoPage.css, type: "text/css; charset=utf-8") }
        router.get("/demo/session") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                guard let handle = try await signedInAccount(request, token: sessions.token(request)),
                    let account = try await accounts.account(handle: handle)
                else {
                    var anonymous: JSONObject = ["user": .null]
                    anonymous["apple"] = .bool(appleWebFlow)
                    return HTTP.ok(anonymous)
                }
                var payload: JSONObject = ["user": .string(account.name)]
                payload["apple"] = .bool(appleWebFlow)
                return HTTP.ok(payload)
            }
        }
        router.get("/demo/credentials") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                let iso = ISO8601DateFormatter()
                let list = try await engine.credentials.credentials(forUser: handle).map { c -> JSONValue in
                    let entry = engine.trustAnchors.metadataEntry(for: c.aaguid)  // the metadata installed now
                    return [
                        "id": .string(Base64URL.encode(c.id)),
                        "authenticator": .string(entry?.displayName() ?? "Unknown authenticator"),
                        "aaguid": .string(c.aaguid.description),
                        "format": .string(c.attestationFormat.rawValue),
                        "backupEligible": .bool(c.backupEligible),
                        "backedUp": .bool(c.backupState),
                        "signCount": .number(Double(c.signCount)),
                        "createdAt": .string(iso.string(from: c.createdAt)),
                        "lastUsedAt": c.lastUsedAt.map { .string(iso.string(from: $0)) } ?? .null,
                        "transports": .array(c.transports.map { .string($0.rawValue) }),
                    ]
                }
                return HTTP.ok(["credentials": .array(list)])
            }
        }
        router.delete("/demo/credentials/:id") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                guard let text = context.parameters.get("id"), text.utf8.count <= 2048, let id = Base64URL.decode(text),
                    let credential = try await engine.credentials.credential(id: id), credential.userHandle == handle
                else {
                    throw WebAuthnError(.credentialUnknown, "you have no such credential")
                }
                _ = try await engine.credentials.delete(id: id)
                Audit.event("credential_deleted", context, ["account": .string(Audit.hash(handle)), "credential": .string(Audit.hash(id))])
                return HTTP.ok()
            }
        }
        router.delete("/demo/account") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                try await deleteAccount(handle)
                Audit.event("account_deleted", context, ["account": .string(Audit.hash(handle))])
                var response = HTTP.ok()
                response.setCookie(sessions.expiredCookie)
                return response
            }
        }
        router.post("/demo/logout") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let token = sessions.token(request)
                let signedIn = try await sessions.signedIn(token, now: now) != nil
                try await sessions.signOut(token)
                if signedIn { Audit.event("signed_out", context) }
                var response = HTTP.ok()
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

    /// The signed-in account's handle, or `sign_in_required`.
    func requireSignedIn(_ request: Request) async throws -> [UInt8] {
        guard let handle = try await signedInAccount(request, token: sessions.token(request)) else {
            throw WebAuthnError(.signInRequired, "sign in first")
        }
        return handle
    }
}
