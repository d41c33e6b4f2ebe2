internal import Foundation
internal import Hummingbird
internal import Logging
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The account's linked identities (Sign in with Apple) in the account API: listed, and unlinked
// by the owner. Red team, thirteenth pass: an Apple ID an intruder linked through a fresh session
// could be neither seen nor removed; it signed in, verified, from then on, deleted the owner's
// last passkey (the Apple ID counting as another way in) and locked the owner out.
extension WebAuthnRoutes {
    /// `GET /identities` and `DELETE /identities/:id` of ``accountRoutes(context:)``.
    func addIdentityRoutes<Context: RemoteAddressRequestContext>(to router: RouteCollection<Context>) {
        router.get("/identities") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                let handle = try await requireSignedIn(request)
                let iso = ISO8601DateFormatter()
                let linked = try await configuration.apple?.identities.identities(forUser: handle) ?? []
                let list = linked.map { identity -> JSONValue in
                    var o: JSONObject = [
                        "id": .string(Base64URL.encode(Array(identity.subject.utf8))), "provider": .string(identity.provider),
                        "linkedAt": .string(iso.string(from: identity.createdAt)),
                    ]
                    o["email"] = identity.email.map(JSONValue.string) ?? .null
                    o["privateEmail"] = identity.isPrivateEmail.map(JSONValue.bool) ?? .null
                    o["emailEnabled"] = identity.emailEnabled.map(JSONValue.bool) ?? .null
                    return .object(o)
                }
                return HTTP.ok(["identities": .array(list)])
            }
        }
        router.delete("/identities/:id") { request, context in
            await handle(request, context) {
                try throttle(request, context)
                try await HTTP.requireReadable(request)
                // As deleting a passkey: a recent verification, and whoever signed in elsewhere goes.
                let session = try await requireRecentSession(request)
                let handle = session.userHandle
                let subject = try identitySubject(context)
                let unrevoked = try await unlinkIdentity(subject, of: handle)
                let ended = try await sessions.store.deleteSessions(userHandle: handle, except: session.idHash)
                var event: Logger.Metadata = [
                    "account": .string(Audit.hash(handle)), "identity": .string(Audit.hash(Array(subject.utf8))), "sessions_ended": .stringConvertible(ended),
                ]
                if unrevoked { event["unrevokedAppleTokens"] = "1" }
                audit("identity_unlinked", request, context, event)
                return HTTP.ok(["otherSessionsEnded": .number(Double(ended))])
            }
        }
    }

    /// The subject an `:id` names (base64url of its UTF-8, at most 1 KiB of text).
    func identitySubject<Context: RequestContext>(_ context: Context) throws -> String {
        guard let text = context.parameters.get("id"), text.utf8.count <= 1024, let bytes = Base64URL.decode(text), !bytes.isEmpty,
            let subject = String(validating: bytes, as: UTF8.self)
        else { throw Self.unknownIdentity }
        return subject
    }

    static let unknownIdentity = WebAuthnError(.identityUnknown, "your account has no such linked identity")
    static let lastIdentity = WebAuthnError(
        .lastCredential, "this Apple ID is the only way to sign in to the account: add a passkey first, or delete the account")

    /// Unlinks the account's Apple identity `subject` unless it is the account's last way in
    /// (`last_credential`), in one transaction where the store keeps credentials and identities
    /// with the accounts (as ``deleteCredential(_:of:)``), then revokes its refresh token at
    /// Apple. Returns whether a token was left unrevoked (Apple failed, or it was sealed under
    /// another secret): the link is gone either way.
    func unlinkIdentity(_ subject: String, of handle: [UInt8]) async throws -> Bool {
        guard let apple = configuration.apple else { throw Self.unknownIdentity }
        let sealed: [UInt8]?
        if let guarding = accounts as? any AccountWayInGuarding, (accounts as AnyObject) === (engine.credentials as AnyObject),
            (accounts as AnyObject) === (apple.identities as AnyObject)
        {
            let (outcome, token) = try await guarding.unlinkIdentity(provider: Self.appleProvider, subject: subject, ofAccount: handle)
            switch outcome {
            case .deleted: sealed = token
            case .lastWayIn: throw Self.lastIdentity
            case .notFound: throw Self.unknownIdentity
            }
        } else {
            sealed = try await credentialDeletions.run(handle) { () async throws(WebAuthnError) -> [UInt8]? in
                do {
                    guard let linked = try await apple.identities.identity(provider: Self.appleProvider, subject: subject), linked.userHandle == handle else {
                        throw Self.unknownIdentity
                    }
                    if try await engine.credentials.credentials(forUser: handle).isEmpty, try await apple.identities.identities(forUser: handle).count < 2 {
                        throw Self.lastIdentity
                    }
                    return try await apple.identities.unlink(provider: Self.appleProvider, subject: subject)?.refreshToken
                } catch let error as WebAuthnError {
                    throw error
                } catch {
                    throw WebAuthnError(.storageFailure, "\(error)")
                }
            }
        }
        guard let sealed else { return false }
        guard let tokens = try? openRefreshTokens(sealed, subject: subject) else { return true }
        var unrevoked = false
        for refresh in tokens where await Self.attempt({ () async throws(WebAuthnError) in try await revoke(refresh, apple) }) != nil { unrevoked = true }
        return unrevoked
    }
}
