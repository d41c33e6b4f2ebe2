internal import Foundation
internal import Hummingbird
internal import Logging
public import SignInWithApple
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Sign in with Apple on the server: what an iOS app built with
/// AuthenticationServices sends (an identity token, an authorization code, the
/// first-consent user data), Apple's server-to-server notifications, and the web
/// flow for browsers. Accounts may hold passkeys and an Apple identity side by side.
public struct AppleConfiguration: Sendable {
    /// Token verification, Apple's keys, the code exchange and revocation.
    public var signIn: AppleSignIn
    /// Where Apple identities are linked to accounts (the SQLite and PostgreSQL stores are such stores).
    public var identities: any LinkedIdentityStore
    /// The Services ID the web flow uses as `client_id`; nil: no web flow.
    public var servicesID: String?
    /// The web flow's redirect URI (registered with Apple; it must reach `POST /apple/web/callback`).
    public var redirectURI: String?

    /// Sign in with Apple over `signIn`, linking identities in `identities`; the web flow
    /// when both `servicesID` and `redirectURI` are given.
    public init(signIn: AppleSignIn, identities: any LinkedIdentityStore, servicesID: String? = nil, redirectURI: String? = nil) {
        self.signIn = signIn
        self.identities = identities
        self.servicesID = servicesID
        self.redirectURI = redirectURI
    }

    /// Whether the web flow (`/apple/web/start`, `/apple/web/callback`) is served.
    public var webFlow: Bool { servicesID != nil && redirectURI != nil }
}

extension WebAuthnRoutes {
    static let appleProvider = "apple"
    /// The codes of Apple's endpoints failing (502): not counted as the client's failures.
    static let appleUpstreamFailures: Set<WebAuthnError.Code> = [.appleEndpointUnavailable, .appleJWKSUnavailable, .appleJWKSInvalid]
    /// How long an issued nonce or web-flow state stays usable: as long as a WebAuthn challenge
    /// (`RelyingParty.challengeLifetime`, 5 minutes by default, as Apple's authorization codes),
    /// at most 10 minutes. Never longer than a challenge: when the engine is full it drops the
    /// ceremonies that expire first, and a stranger's flood of longer-lived nonces made every
    /// WebAuthn ceremony the first to go, so nobody could sign in while it lasted (red team).
    var appleNonceLifetime: TimeInterval { min(600, engine.relyingParty.challengeLifetime) }
    /// The cookie that binds a web flow to the browser that started it.
    var appleFlowCookieName: String { configuration.secureCookies ? "__Host-webauthn_apple_flow" : "webauthn_apple_flow" }

    func addApple<Context: RequestContext>(to router: RouteCollection<Context>, _ apple: AppleConfiguration) {
        router.post("/apple/nonce") { request, context in
            await ceremony(request, context, as: "apple_nonce", starts: true) { try await appleNonce(request) }
        }
        router.post("/apple/signin") { request, context in
            await ceremony(request, context, as: "apple_sign_in") { try await appleSignIn(request, context, apple) }
        }
        router.post("/apple/notifications") { request, context in
            await handle(request, context) {
                try HTTP.requireJSON(request)
                try throttle(request, context)
                return try await appleNotification(request, context, apple)
            }
        }
        if apple.webFlow {
            router.get("/apple/web/start") { request, context in
                await handle(request, context) {
                    try throttle(request, context, starts: true)
                    return try await appleWebStart(request, apple)
                }
            }
            router.post("/apple/web/callback") { request, context in
                await handle(request, context) {
                    try throttle(request, context)
                    return try await appleWebCallback(request, context, apple)
                }
            }
        }
    }

    // MARK: Native flow

    /// `POST /apple/nonce`: a single-use nonce for the app to put (raw or as its
    /// SHA-256) into its `ASAuthorizationAppleIDRequest`; bound to this session.
    func appleNonce(_ request: Request) async throws -> Response {
        // No members, but an object, as every options route (red team, round 26).
        _ = try RequestMembers(await HTTP.body(request, limit: 1024, whenEmpty: [:]))
        let token = sessions.token(request) ?? sessions.mint()
        let nonce = Base64URL.encode(SecureRandom.bytes(32))
        let key = Digest.sha256(Array(nonce.utf8))
        try await engine.storeSingleUse(.appleNonce, key: key, binding: token.binding, lifetime: appleNonceLifetime)
        let payload: JSONObject = ["nonce": .string(nonce), "nonceSHA256": .string(Bytes.hex(key))]
        return HTTP.ok(payload, cookie: sessions.cookie(token))
    }

    /// The stored key of a nonce claim: the claim is the nonce the server issued, or its
    /// SHA-256 in lowercase hex (what Apple's sample code sends); both map to one key.
    static func appleNonceKey(_ claim: String) -> [UInt8] {
        if claim.utf8.count == 64, let bytes = Bytes.fromHex(claim), Bytes.sameUTF8(Bytes.hex(bytes), claim) { return bytes }
        return Digest.sha256(Array(claim.utf8))
    }

    /// `POST /apple/signin`: verifies the identity token, consumes its nonce (issued to
    /// this session), exchanges the code for the same user, then finds, links or creates
    /// the account and signs the session in. Nothing is stored unless every step passed.
    func appleSignIn<Context: RequestContext>(_ request: Request, _ context: Context, _ apple: AppleConfiguration) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        guard let identityToken = body["identityToken"]?.stringValue, !identityToken.isEmpty,
            let code = body["authorizationCode"]?.stringValue, !code.isEmpty, code.utf8.count <= 1024
        else {
            throw WebAuthnError(.requestMalformed, "identityToken and authorizationCode are required strings")
        }
        let token = sessions.token(request)
        let attempt = try beginAttempt(token, request, context)
        do {
            let identity = try await apple.signIn.verifyIdentityToken(identityToken, nonce: nil)
            guard let claim = identity.nonce else {
                throw WebAuthnError(.appleNonceMismatch, "the identity token carries no nonce; ask POST /apple/nonce for one and put it in the request")
            }
            try await requireRecentToLink(identity, token: token, apple)
            try await engine.consumeSingleUse(.appleNonce, key: Self.appleNonceKey(claim), binding: token?.binding)
            let exchange = try await apple.signIn.exchange(code: code, clientID: identity.audience, expectedSub: identity.sub)
            let (signedIn, created) = try await appleSignedIn(
                identity, refreshToken: exchange.tokens.refreshToken, user: AppleUserData(body["user"]), method: "apple", request, context, token: token,
                apple)
            var payload: JSONObject = ["sub": .string(identity.sub), "created": .bool(created)]
            payload["email"] = identity.email.map(JSONValue.string) ?? JSONValue.null
            settleAttempt(attempt)
            return HTTP.ok(payload, cookie: sessions.cookie(signedIn))
        } catch let error as WebAuthnError {
            // Apple failing is not the client's failure: it does not spend the session's allowance.
            settleAttempt(attempt, failure: error.code, notTheClients: Self.serverFailures.union(Self.appleUpstreamFailures))
            audit("apple_sign_in_failed", request, context, ["code": .string(error.code.rawValue)])
            throw error
        } catch {
            settleAttempt(attempt, failure: .storageFailure)  // a store's own error: the server's failure
            throw error
        }
    }

    /// The end of both flows, once the token is verified and the code exchanged: the account
    /// found, linked or made (``appleAccount(_:refreshToken:user:request:token:_:)``), the session
    /// signed in and verified, the sign-in audited. A failure from here on revokes the refresh
    /// token just issued unless an identity holds it (``revokeUnheld(_:of:_:)``).
    func appleSignedIn<Context: RequestContext>(
        _ identity: AppleIdentityToken, refreshToken: String?, user: AppleUserData, method: String, _ request: Request, _ context: Context,
        token: BrowserSessions.Token?, _ apple: AppleConfiguration
    ) async throws -> (session: BrowserSessions.Token, created: Bool) {
        let handle: [UInt8], created: Bool, linkedThrough: BrowserSessions.Token?
        do {
            (handle, created, linkedThrough) = try await appleAccount(
                identity, refreshToken: refreshToken, user: user, request: request, token: token, apple)
        } catch {
            await revokeUnheld(refreshToken, of: identity, apple)
            throw error
        }
        let signedIn: BrowserSessions.Token
        if let linkedThrough {
            // The link stands on that session: ended meanwhile (signed out everywhere, by a
            // passkey's deletion or an unlink), it takes the link back.
            guard let fresh = try await sessions.signIn(handle, inPlaceOf: linkedThrough, now: now, verified: true) else {
                try await takeBack(identity, from: handle, refreshToken: refreshToken, apple)
                throw WebAuthnError(.signInRequired, "the session ended while this Apple ID was being linked; sign in again")
            }
            signedIn = fresh
        } else {
            signedIn = try await sessions.signIn(handle, replacing: token, now: now, verified: true)
        }
        // Read after the session is stored: an account deleted (or an identity unlinked) while this
        // sign-in ran either ends this session too, or is seen here. Its session then ends and the
        // refresh token just issued is revoked (red team, twelfth pass, PostgreSQL: sessions of
        // deleted accounts were left behind).
        let linked = try await apple.identities.identity(provider: Self.appleProvider, subject: identity.sub)
        guard let linked, linked.userHandle == handle else {
            try await sessions.store.delete(idHash: signedIn.binding)
            await revokeUnheld(refreshToken, of: identity, apple)
            throw WebAuthnError(.accountUnknown, "the account was deleted, or this Apple ID unlinked from it, while signing in; sign in again")
        }
        let metadata: Logger.Metadata = ["account": .string(Audit.hash(handle)), "method": .string(method), "created": .string(created ? "true" : "false")]
        audit("signed_in", request, context, metadata)
        return (signedIn, created)
    }

    /// Refuses (`reauthentication_required`) to link a new Apple identity to the account a
    /// passkey session is signed in to, unless the session verified the user within the
    /// step-up window: linking adds a way into the account, as adding a passkey does, and the
    /// sign-in that follows marks the session verified. Red team: a stolen session, too old
    /// to delete a passkey, linked the thief's own Apple ID, came back verified, deleted the
    /// victim's passkeys, and the thief's Apple ID signed in to the account from then on.
    /// An identity already linked (or transferred from one that is) only signs in to its own
    /// account; an account signed in only through the host's `signedInAccount` hook is the
    /// host's to vouch for. Checked before the nonce is spent and the code exchanged.
    func requireRecentToLink(_ identity: AppleIdentityToken, token: BrowserSessions.Token?, _ apple: AppleConfiguration) async throws {
        guard let session = try await sessions.signedIn(token, now: now) else { return }
        for subject in [identity.sub] + (identity.transferSub.map { [$0] } ?? []) {
            if try await apple.identities.identity(provider: Self.appleProvider, subject: subject) != nil { return }
        }
        try requireRecent(session)
    }

    /// The account of a verified Apple identity: the one it is linked to (or, after a team
    /// transfer, the one its old subject was), else the signed-in account (linked now, if the
    /// session verified the user recently: see ``requireRecentToLink(_:token:_:)``), else a new one
    /// made with it. The refresh token is kept sealed under the server secret, bound to the
    /// identity, with the client id it was issued to.
    func appleAccount(
        _ identity: AppleIdentityToken, refreshToken: String?, user: AppleUserData, request: Request,
        token: BrowserSessions.Token?, _ apple: AppleConfiguration
    ) async throws -> (handle: [UInt8], created: Bool, linkedThrough: BrowserSessions.Token?) {
        let now = self.now
        // A linked identity: its email fields and its new refresh token kept (beside those of its
        // other client ids), written only over the tokens it was read with (``updateIdentity(_:in:_:)``).
        func signIn(_ linked: LinkedIdentity) async throws -> (handle: [UInt8], created: Bool, linkedThrough: BrowserSessions.Token?) {
            _ = try await updateIdentity(linked, in: apple.identities) { (linked) throws(WebAuthnError) in
                // Another address: whether mail reaches the old one says nothing of it, and an
                // email event dated before this sign-in is about the old one.
                if let email = identity.email, email.lowercased() != linked.email?.lowercased() {
                    linked.emailEnabled = nil
                    linked.emailChangedAt = now
                }
                linked.email = identity.email ?? linked.email
                linked.emailVerified = identity.emailVerified ?? linked.emailVerified
                linked.isPrivateEmail = identity.isPrivateEmail ?? linked.isPrivateEmail
                if let refreshToken {
                    linked.refreshToken = try sealRefreshToken(refreshToken, clientID: identity.audience, subject: identity.sub, keeping: linked.refreshToken)
                }
                linked.updatedAt = now
                return true
            }
            return (linked.userHandle, false, nil)
        }
        if let linked = try await apple.identities.identity(provider: Self.appleProvider, subject: identity.sub) { return try await signIn(linked) }
        if let transferred = identity.transferSub,
            try await apple.identities.relink(provider: Self.appleProvider, subject: transferred, to: identity.sub, at: now),
            let moved = try await apple.identities.identity(provider: Self.appleProvider, subject: identity.sub)
        {
            return try await signIn(moved)  // the new team's token replaces the old team's
        }
        // Linked now or made with it: the token alone (a linked identity's is sealed with its others above).
        let sealed = try refreshToken.map { try sealRefreshToken($0, clientID: identity.audience, subject: identity.sub) }
        // The signed-in account, as ``signedInAccount(_:token:)`` finds it, with the session read
        // once (read twice, a session ending in between took the link down the unconditional path).
        let session = try await sessions.signedIn(token, now: now)
        var hosted: [UInt8]?
        if let hook = configuration.signedInAccount { hosted = await hook(request) }
        if let handle = hosted ?? session?.userHandle {
            let throughSession = session?.userHandle == handle
            if let session, throughSession { try requireRecent(session) }
            try await apple.identities.link(
                LinkedIdentity(
                    provider: Self.appleProvider, subject: identity.sub, userHandle: handle, email: identity.email, emailVerified: identity.emailVerified,
                    isPrivateEmail: identity.isPrivateEmail, refreshToken: sealed, createdAt: now))
            // Signed in in place of that session only while it lasts (``appleSignedIn``): one
            // ended meanwhile takes the link back.
            return (handle, false, throughSession ? token : nil)
        }
        // A new account, named `apple-` and 12 characters derived from the subject under the server
        // secret. Not by the email: sign-up answers 409 for a taken name to anyone, so an account
        // named by its Apple ID's email told a stranger whether that address had an account here;
        // nor by a plain hash of the subject, which whoever knows the subject could register first
        // (red team, thirteenth pass). The email stays with the identity; the first-consent user
        // data (unsigned), else the email, is the display name.
        let derived = Digest.hmacSHA256(key: configuration.secret, Array("apple account name".utf8), Array(identity.sub.utf8))
        let displayName = [user.displayName, identity.email].lazy.compactMap { $0.flatMap { try? UserName.normalize(displayName: $0) } }.first
        for seed in [derived, SecureRandom.bytes(32)] {
            let name = "apple-" + Base64URL.encode(Array(seed.prefix(9)))
            let account = try UserEntity(id: SecureRandom.bytes(32), name: name, displayName: displayName ?? name)
            do {
                try await apple.identities.create(
                    account,
                    firstIdentity: LinkedIdentity(
                        provider: Self.appleProvider, subject: identity.sub, userHandle: account.id, email: identity.email,
                        emailVerified: identity.emailVerified, isPrivateEmail: identity.isPrivateEmail, refreshToken: sealed, createdAt: now))
                return (account.id, true, nil)
            } catch let error as WebAuthnError where error.code == .identityAlreadyLinked {
                // The same Apple ID's first sign-in on another device won: sign in to its account.
                guard let linked = try await apple.identities.identity(provider: Self.appleProvider, subject: identity.sub) else { throw error }
                return try await signIn(linked)
            } catch let error as WebAuthnError where error.code == .usernameUnavailable {
                continue  // taken (by chance, or by someone): a random name instead
            }
        }
        throw WebAuthnError(.usernameUnavailable, "no free account name for this Apple identity")
    }
}

/// The first-consent `user` object an app or Apple's form post sends: unsigned,
/// display data only (`{"name": {"firstName", "lastName"}, "email"}`).
struct AppleUserData {
    let displayName: String?

    init(_ json: JSONValue?) {
        let name: JSONValue? = json?["name"]
        var parts: [String] = []
        if let first = name?["firstName"]?.stringValue { parts.append(String(first.prefix(64))) }
        if let last = name?["lastName"]?.stringValue { parts.append(String(last.prefix(64))) }
        let joined: String = parts.joined(separator: " ").trimmingCharacters(in: .whitespaces)
        displayName = joined.isEmpty ? nil : joined
    }
}
