internal import Foundation
internal import Hummingbird
internal import WebAuthnCore
internal import _WebAuthnCrypto

/// Sign in with Apple: the web flow for browsers.
extension WebAuthnRoutes {
    // MARK: Web flow

    /// The flow cookie: SameSite=None and Secure over HTTPS (Apple's form post is cross-site), Lax otherwise.
    func appleFlowCookie(value: String, maxAge: Int) -> SetCookie {
        let secure = configuration.secureCookies
        return SetCookie(name: appleFlowCookieName, value: value, SetCookie.Attributes(maxAge: maxAge, secure: secure, sameSite: secure ? .none : .lax))
    }

    /// The nonce of a web-flow state: derived from it under the server secret, so only the state is stored.
    func appleWebNonce(_ state: String) -> String {
        Base64URL.encode(Digest.hmacSHA256(key: configuration.secret, Array("apple web nonce".utf8), Array(state.utf8)))
    }

    /// `GET /apple/web/start`: a single-use state bound to this browser by a flow cookie
    /// (SameSite=None and Secure over HTTPS, so Apple's cross-site form post carries it),
    /// then a redirect to Apple's authorization page.
    ///
    /// The flow cookie also carries the id hash of the browser's session, if it has one (this
    /// GET is same-site, so the SameSite=Strict session cookie comes with it; Apple's form post
    /// will not bring it): the callback ends that session, as every other sign-in replaces the
    /// browser's session. Red team, thirteenth pass: it stayed signed in, recently verified, for
    /// its whole lifetime, and the browser, holding the new cookie, could no longer end it. The
    /// stored state is bound to the whole cookie, so a changed cookie fails the state.
    func appleWebStart(_ request: Request, _ apple: AppleConfiguration) async throws -> Response {
        guard let servicesID = apple.servicesID, let redirectURI = apple.redirectURI else { throw WebAuthnError(.configurationInvalid, "no web flow") }
        let flow = SecureRandom.bytes(32) + (sessions.token(request)?.binding ?? [])
        let state = Base64URL.encode(SecureRandom.bytes(32))
        try await engine.storeSingleUse(
            .appleState, key: Digest.sha256(Array(state.utf8)), binding: Digest.sha256(flow),
            lifetime: appleNonceLifetime)
        var components = URLComponents(url: apple.signIn.configuration.baseURL.appendingPathComponent("auth/authorize"), resolvingAgainstBaseURL: false)
        let query: [(String, String)] = [
            ("client_id", servicesID), ("redirect_uri", redirectURI), ("response_type", "code id_token"), ("response_mode", "form_post"),
            ("scope", "name email"), ("state", state), ("nonce", appleWebNonce(state)),
        ]
        components?.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let location = components?.url?.absoluteString else { throw WebAuthnError(.configurationInvalid, "the Apple base URL is not a URL") }
        var response = Response(status: .found, headers: [.location: location, .cacheControl: "no-store"])
        response.setCookie(appleFlowCookie(value: Base64URL.encode(flow), maxAge: Int(appleNonceLifetime)))
        return response
    }

    /// `POST /apple/web/callback`: Apple's form post (`code`, `id_token`, `state`, and on
    /// first consent `user`). The state must be one this browser started (its flow
    /// cookie), unused and unexpired; the token must carry the state's nonce; the code is
    /// exchanged with the Services ID. Then 303 to `/`, signed in.
    func appleWebCallback<Context: RequestContext>(_ request: Request, _ context: Context, _ apple: AppleConfiguration) async throws -> Response {
        guard let servicesID = apple.servicesID else { throw WebAuthnError(.configurationInvalid, "no web flow") }
        let buffer = try await HTTP.collect(request, limit: configuration.maxBodySize)
        let form = try HTTP.form(Array(buffer.readableBytesView))
        guard let state = form["state"], !state.isEmpty, state.utf8.count <= 256, let idToken = form["id_token"], let code = form["code"],
            !code.isEmpty, code.utf8.count <= 1024
        else {
            throw WebAuthnError(.requestMalformed, "the form needs code, id_token and state")
        }
        let flow = HTTP.cookie(appleFlowCookieName, in: request).flatMap { Base64URL.decode(String($0)) }
        try await engine.consumeSingleUse(.appleState, key: Digest.sha256(Array(state.utf8)), binding: flow.map(Digest.sha256) ?? [])
        let identity = try await apple.signIn.verifyIdentityToken(idToken, nonce: appleWebNonce(state))
        guard Bytes.sameUTF8(identity.audience, servicesID) else {
            throw WebAuthnError(.appleTokenClaimInvalid, "the web flow's token is for another client than the Services ID")
        }
        let token = sessions.token(request)
        try await requireRecentToLink(identity, token: token, apple)
        let exchange = try await apple.signIn.exchange(code: code, clientID: servicesID, redirectURI: apple.redirectURI, expectedSub: identity.sub)
        let user = AppleUserData(form["user"].flatMap { try? JSONValue.parse($0, limits: JSONLimits(maxBytes: 4096, maxDepth: 4)) })
        let (signedIn, _) = try await appleSignedIn(
            identity, refreshToken: exchange.tokens.refreshToken, user: user, method: "apple-web", request, context, token: token, apple)
        // The session the browser had when it started (see ``appleWebStart(_:_:)``) ends now.
        if let flow, flow.count == 64, Array(flow[32...]) != token?.binding { try await sessions.store.delete(idHash: Array(flow[32...])) }
        var response = Response(status: .seeOther, headers: [.location: "/", .cacheControl: "no-store"])
        response.setCookie(sessions.cookie(signedIn))
        response.setCookie(appleFlowCookie(value: "", maxAge: 0))
        return response
    }
}
