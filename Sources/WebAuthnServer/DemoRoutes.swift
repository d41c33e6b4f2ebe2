import Foundation
import Hummingbird
import WebAuthnCore

extension WebAuthnRoutes {
    /// The demo page and its small API: who is signed in, their credentials, delete one, sign out.
    func addDemo<Context: RequestContext>(to router: Router<Context>) {
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: DemoPage.html)))
        }
        router.get("/demo/session") { request, _ in
            await handle(request) {
                guard let handle = sessions.session(sessionID(request))?.signedIn, let account = try await accounts.account(handle: handle) else {
                    return HTTP.ok(["user": .null])
                }
                return HTTP.ok(["user": .string(account.name)])
            }
        }
        router.get("/demo/credentials") { request, _ in
            await handle(request) {
                let handle = try signedIn(request)
                let iso = ISO8601DateFormatter()
                let list = try await engine.credentials.credentials(forUser: handle).map { c -> JSONValue in
                    let entry = engine.relyingParty.trustAnchors.entry(aaguid: c.aaguid, attestationCertificate: nil)
                    return [
                        "id": .string(Base64URL.encode(c.id)),
                        "authenticator": .string(entry?.description ?? "Unknown authenticator"),
                        "aaguid": .string(c.aaguid.description),
                        "format": .string(c.attestationFormat),
                        "backupEligible": .bool(c.backupEligible),
                        "backedUp": .bool(c.backupState),
                        "signCount": .number(Double(c.signCount)),
                        "createdAt": .string(iso.string(from: c.createdAt)),
                        "lastUsedAt": c.lastUsedAt.map { .string(iso.string(from: $0)) } ?? .null,
                        "transports": .array(c.transports.map { .string($0) }),
                    ]
                }
                return HTTP.ok(["credentials": .array(list)])
            }
        }
        router.delete("/demo/credentials/:id") { request, context in
            await handle(request) {
                let handle = try signedIn(request)
                guard let text = context.parameters.get("id"), let id = Base64URL.decode(text),
                      let credential = try await engine.credentials.credential(id: id), credential.userHandle == handle else {
                    throw WebAuthnError(.credentialUnknown, "you have no such credential")
                }
                _ = try await engine.credentials.delete(id: id)
                return HTTP.ok()
            }
        }
        router.post("/demo/logout") { request, _ in
            sessions.end(sessionID(request))
            return HTTP.ok()
        }
    }

    func signedIn(_ request: Request) throws(WebAuthnError) -> [UInt8] {
        guard let handle = sessions.session(sessionID(request))?.signedIn else {
            throw WebAuthnError(.credentialUnknown, "sign in first")
        }
        return handle
    }
}
