internal import Foundation
public import Hummingbird
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Step-up: the server side of an app's biometric re-check. Sensitive actions
/// (deleting a credential or the account, adding a passkey to an account that
/// has one) need the signed-in account to have verified the user within
/// ``ServerConfiguration/reauthenticationWindow``: a sign-in with user
/// verification, Sign in with Apple, or a re-authentication through
/// `POST /reauthentication/options` and `/reauthentication/result` (an
/// assertion with `userVerification: "required"`, limited to the account's
/// credentials). The session records when (`SignedInSession.authenticatedAt`).
extension WebAuthnRoutes {
    /// For a host app's own routes: the handle of the account the request is signed in as
    /// (``ServerConfiguration/signedInAccount`` first, then the passkey session), or nil.
    /// For sensitive actions use ``requireRecentVerification(_:)``.
    ///
    /// ```swift
    /// router.get("/orders") { request, context in
    ///     guard let account = try await webauthn.signedInAccount(request) else { throw HTTPError(.unauthorized) }
    ///     ...
    /// }
    /// ```
    ///
    /// - Throws: `storage_failure` when the session store fails.
    public func signedInAccount(_ request: Request) async throws(WebAuthnError) -> [UInt8]? {
        do { return try await signedInAccount(request, token: sessions.token(request)) } catch { throw Self.typed(error) }
    }

    /// For a host app's own routes: the handle of the signed-in account, if it verified
    /// the user within ``ServerConfiguration/reauthenticationWindow``.
    ///
    /// ```swift
    /// router.post("/payments") { request, context in
    ///     let account = try await webauthn.requireRecentVerification(request)  // reauthentication_required otherwise
    ///     ...
    /// }
    /// ```
    ///
    /// - Throws: `sign_in_required` without a signed-in session; `reauthentication_required`
    ///   when the account has not verified the user recently (the page then runs
    ///   `/reauthentication/options` and `/result`, and tries again);
    ///   `storage_failure` when the session store fails.
    public func requireRecentVerification(_ request: Request) async throws(WebAuthnError) -> [UInt8] {
        do { return try await requireRecentSession(request).userHandle } catch { throw Self.typed(error) }
    }

    /// `error` as a `WebAuthnError`: itself, or, from a store, `storage_failure` with its text.
    static func typed(_ error: any Error) -> WebAuthnError {
        (error as? WebAuthnError) ?? WebAuthnError(.storageFailure, "\(error)")
    }

    /// The signed-in session of the request, if it verified the user recently; see ``requireRecentVerification(_:)``.
    /// With a host's own sign-in (``ServerConfiguration/signedInAccount``), the passkey session
    /// must be of the account the host says is signed in: one request acts on one account (red
    /// team: the account routes listed and renamed the host's account, and deleted from the
    /// account of a passkey cookie left in the same browser).
    func requireRecentSession(_ request: Request) async throws -> SignedInSession {
        guard let session = try await sessions.signedIn(sessions.token(request), now: now) else {
            throw WebAuthnError(.signInRequired, "sign in first")
        }
        if let hook = configuration.signedInAccount, let hosted = await hook(request), !Bytes.constantTimeEqual(hosted, session.userHandle) {
            throw WebAuthnError(.reauthenticationRequired, "confirm it is you: verify with a passkey of the account you are signed in to")
        }
        try requireRecent(session)
        return session
    }

    func requireRecent(_ session: SignedInSession) throws {
        let age = now.timeIntervalSince(session.authenticatedAt)
        guard age >= -60, age <= configuration.reauthenticationWindow else {
            throw WebAuthnError(
                .reauthenticationRequired,
                "confirm it is you: verify with a passkey (or sign in again) within \(Self.duration(configuration.reauthenticationWindow)) of this action")
        }
    }

    /// Whether an assertion counts as verifying the user for step-up: one with UV does; one
    /// without does only when none of the account's credentials has ever verified the user
    /// (security keys without a PIN or biometric), so such an account is not locked out of
    /// its own settings: for it, a fresh sign-in is the strongest proof there is.
    func verifiesUser(_ userVerified: Bool, account: [UInt8]) async throws -> Bool {
        if userVerified { return true }
        return !(try await engine.credentials.credentials(forUser: account)).contains(where: \.uvInitialized)
    }

    /// "5 minutes", "45 seconds".
    static func duration(_ seconds: TimeInterval) -> String {
        seconds >= 120 ? "\(Int(seconds / 60)) minutes" : "\(Int(seconds)) seconds"
    }

    /// `POST /reauthentication/options` and `/reauthentication/result`.
    func addReauthentication<Context: RequestContext>(to router: RouteCollection<Context>) {
        router.post("/reauthentication/options") { request, context in
            await ceremony(request, context, as: "reauthentication_options", starts: true) {
                // No members, but an object (red team, round 26: a body that was not JSON was ignored).
                _ = try RequestMembers(await HTTP.body(request, limit: 1024, whenEmpty: [:]))
                let token = sessions.token(request)
                guard let token, let session = try await sessions.signedIn(token, now: now) else {
                    throw WebAuthnError(.signInRequired, "sign in first")
                }
                let records = try await engine.credentials.credentials(forUser: session.userHandle)
                guard !records.isEmpty else {
                    throw WebAuthnError(.credentialUnknown, "the account has no passkey to verify with; sign in again instead")
                }
                // UV required, unless no credential of the account has ever verified the user (see verifiesUser).
                let uv: UserVerificationRequirement = records.contains(where: \.uvInitialized) ? .required : .preferred
                let options = try await engine.startAuthentication(
                    userHandle: session.userHandle, userVerification: uv, binding: token.binding,
                    allowCredentials: records.map { CredentialDescriptor(id: $0.id, transports: $0.transports) })
                return HTTP.ok(options.json.objectValue ?? JSONObject())
            }
        }
        router.post("/reauthentication/result") { request, context in
            await ceremony(request, context, as: "reauthentication") {
                let body = try await HTTP.body(request, limit: configuration.maxBodySize)
                let token = sessions.token(request)
                guard let token, let session = try await sessions.signedIn(token, now: now) else {
                    throw WebAuthnError(.signInRequired, "sign in first")
                }
                // The renewed session is stored with the assertion's commit, and only if the assertion is
                // the signed-in account's, with user verification (also when the options came from a
                // plain sign-in): checked before anything is written, so a refusal changes nothing.
                let renewed = sessions.mint()
                let now = self.now
                let signingIn = SessionSignIn<AuthenticationResult>(store: sessions.store, replacing: token.binding) { [self] result in
                    guard result.userHandle == session.userHandle, try await verifiesUser(result.userVerified, account: result.userHandle) else {
                        throw WebAuthnError(.reauthenticationRequired, "the assertion did not verify the signed-in account's user")
                    }
                    return sessions.session(for: session.userHandle, token: renewed, now: now, verified: true, since: session.createdAt)
                }
                let attempt = try beginAttempt(token, request, context)
                do throws(WebAuthnError) {
                    _ = try await engine.finishAuthentication(AuthenticationResponse(json: body), binding: token.binding, signingIn: signingIn)
                } catch {
                    audit("reauthentication_failed", request, context, ["code": .string(error.code.rawValue)])
                    settleAttempt(attempt, failure: error.code)
                    if Self.serverFailures.contains(error.code) { throw error }
                    if error.code == .reauthenticationRequired || Self.shownBeforeLookup.contains(error.code) { throw error }
                    throw WebAuthnError(.authenticationFailed, "the credential could not be verified")
                }
                settleAttempt(attempt)
                await sessions.sweepIfDue(now: now)
                audit("reauthenticated", request, context, ["account": .string(Audit.hash(session.userHandle))])
                return HTTP.ok(
                    ["verifiedUntil": .string(ISO8601DateFormatter().string(from: now.addingTimeInterval(configuration.reauthenticationWindow)))],
                    cookie: sessions.cookie(renewed))
            }
        }
    }
}
