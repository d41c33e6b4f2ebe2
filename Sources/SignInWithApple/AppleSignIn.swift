internal import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Sign in with Apple for a server: verifies identity tokens and notifications
/// with Apple's keys (cached, see ``AppleKeyCache``), and talks to Apple's
/// token and revoke endpoints (``AppleTokenClient``). One per process; share it.
public struct AppleSignIn: Sendable {
    /// The configuration.
    public let configuration: SignInWithAppleConfiguration
    /// Apple's keys.
    public let keys: AppleKeyCache
    /// The clock tokens are checked against.
    public let clock: WebAuthnClock

    /// A service over `configuration`; the keys come from `fetcher`
    /// (by default `<baseURL>/auth/keys` through ``AppleHTTPKeyFetcher``).
    public init(configuration: SignInWithAppleConfiguration, fetcher: (any AppleKeyFetching)? = nil, clock: WebAuthnClock = .system) {
        self.configuration = configuration
        self.clock = clock
        self.keys = AppleKeyCache(fetcher: fetcher ?? AppleHTTPKeyFetcher(configuration: configuration), clock: clock)
    }

    /// Verifies an identity token (see ``AppleTokenVerifier``); `nonce` is the one the
    /// server issued for this sign-in (the claim may be it or its SHA-256 in hex), or
    /// `nil` when the flow has none.
    public func verifyIdentityToken(_ token: String, nonce: String?) async throws(WebAuthnError) -> AppleIdentityToken {
        let signed = try SignedToken(Array(token.utf8))
        let set = try await keys.keySet(containing: signed.kid)
        return try AppleTokenVerifier.identityToken(
            signed, key: try set.key(for: signed.kid), clientIDs: configuration.clientIDs,
            nonce: nonce, now: clock.now(), leeway: configuration.leeway)
    }

    /// Verifies the body of a server-to-server notification (`{"payload": "<JWS>"}`).
    public func verifyNotification(body: [UInt8]) async throws(WebAuthnError) -> AppleNotification {
        let signed = try SignedToken(Array(try AppleNotification.payload(fromBody: body).utf8))
        let set = try await keys.keySet(containing: signed.kid)
        return try AppleNotification.verified(
            signed, key: try set.key(for: signed.kid), clientIDs: configuration.clientIDs,
            now: clock.now(), leeway: configuration.leeway)
    }

    /// The result of a code exchange whose identity token verified.
    public struct Exchange: Sendable {
        /// Apple's answer (keep ``AppleTokenResponse/refreshToken`` for revocation).
        public let tokens: AppleTokenResponse
        /// The verified identity token of the answer.
        public let identity: AppleIdentityToken
    }

    /// Exchanges an authorization code, then verifies the answer's identity token
    /// (no nonce: the one the app sent was checked already; its `aud` must be `clientID`) and, when `expectedSub`
    /// is given, that it names the same user: `apple_token_claim_invalid` otherwise.
    public func exchange(
        code: String, clientID: String, redirectURI: String? = nil,
        expectedSub: String? = nil
    ) async throws(WebAuthnError) -> Exchange {
        let tokens = try await tokenClient().exchange(code: code, clientID: clientID, redirectURI: redirectURI)
        guard let idToken = tokens.idToken else {
            throw WebAuthnError(.appleEndpointUnavailable, "Apple's token answer has no id_token")
        }
        // Addressed to the client the code was exchanged for, not to any configured client (red team:
        // a token for the Services ID was taken from an exchange made as the app).
        let signed = try SignedToken(Array(idToken.utf8))
        let set = try await keys.keySet(containing: signed.kid)
        let identity = try AppleTokenVerifier.identityToken(
            signed, key: try set.key(for: signed.kid), clientIDs: [clientID], nonce: nil, now: clock.now(), leeway: configuration.leeway)
        if let expectedSub, !Bytes.sameUTF8(identity.sub, expectedSub) {
            throw WebAuthnError(.appleTokenClaimInvalid, "the code's identity token is for another user than the identity token sent")
        }
        return Exchange(tokens: tokens, identity: identity)
    }

    /// The token and revoke client (throws `configuration_invalid` without credentials).
    public func tokenClient() throws(WebAuthnError) -> AppleTokenClient {
        try AppleTokenClient(configuration: configuration, clock: clock)
    }
}
