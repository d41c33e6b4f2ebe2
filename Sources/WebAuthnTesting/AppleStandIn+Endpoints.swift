internal import Foundation
internal import WebAuthnCore
internal import SignInWithApple
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension AppleStandIn {
    typealias Request = LoopbackHTTPServer.Request
    typealias Response = LoopbackHTTPServer.Response

    func handle(_ request: Request) -> Response {
        switch (request.method, request.path) {
        case ("GET", "/auth/keys"): return keys()
        case ("POST", "/auth/token"): return token(FormCoding.decode(String(decoding: request.body, as: UTF8.self)))
        case ("POST", "/auth/revoke"): return revoke(FormCoding.decode(String(decoding: request.body, as: UTF8.self)))
        case ("GET", "/auth/authorize"): return authorize(request.query)
        default: return .json(404, #"{"error":"not_found"}"#)
        }
    }

    private func keys() -> Response {
        let available = state.withLock { s -> Bool in
            s.keySetRequests += 1
            return s.keysAvailable
        }
        guard available else { return .json(503, #"{"error":"unavailable"}"#) }
        return .json(200, keySetJSON)
    }

    static func field(_ form: [(String, String)], _ name: String) -> String? {
        let values = form.filter { $0.0 == name }
        return values.count == 1 ? values[0].1 : nil
    }

    static func oauthError(_ error: String) -> Response { .json(400, #"{"error":"\#(error)"}"#) }

    /// The client secret check, as Apple makes it: an ES256 JWS with the registered `kid`
    /// whose signature verifies with the registered key, `iss` the team, `sub` the client id,
    /// `aud` Apple, `iat` not in the future, `exp` in the future and at most 15,777,000 s after `iat`.
    func clientError(_ form: [(String, String)]) -> String? {
        guard let clientID = Self.field(form, "client_id"), clientIDs.contains(clientID),
            let secret = Self.field(form, "client_secret")
        else { return "invalid_client" }
        guard let jws = try? JWS(compact: Array(secret.utf8), maxSize: 4096), jws.algorithm == .es256,
            jws.header["alg"]?.stringValue == "ES256", jws.header["kid"]?.stringValue == keyID,
            (try? jws.verifySignature(with: clientKey)) != nil
        else { return "invalid_client" }
        let c = jws.payload
        let now = clock.now().timeIntervalSince1970
        guard c["iss"]?.stringValue == teamID, c["sub"]?.stringValue == clientID,
            c["aud"]?.stringValue == SignInWithAppleConfiguration.issuer,
            let iat = c["iat"]?.numberValue, let exp = c["exp"]?.numberValue,
            iat <= now + 5, exp > now, exp - iat <= 15_777_000
        else { return "invalid_client" }
        return nil
    }

    private func token(_ form: [(String, String)]) -> Response {
        if let error = clientError(form) { return Self.oauthError(error) }
        let clientID = Self.field(form, "client_id") ?? ""
        switch Self.field(form, "grant_type") {
        case "authorization_code"?:
            guard let code = Self.field(form, "code") else { return Self.oauthError("invalid_request") }
            let redirect = Self.field(form, "redirect_uri")
            let now = clock.now()
            let grant = state.withLock { s -> Code? in
                s.codeExchanges += 1
                guard var entry = s.codes[code], !entry.used else { return nil }
                entry.used = true  // a failed attempt uses the code up too, as Apple's does
                s.codes[code] = entry
                guard entry.expires > now, entry.clientID == clientID, entry.redirectURI == redirect else { return nil }
                return entry
            }
            guard let grant else { return Self.oauthError("invalid_grant") }
            let refresh = "r" + Bytes.hex(SecureRandom.bytes(16)) + ".0.standin"
            state.withLock { $0.refreshTokens[refresh] = RefreshToken(user: grant.user, clientID: clientID, revoked: false) }
            let idToken = identityToken(for: grant.user, audience: exchangeAudience ?? clientID, nonce: grant.nonce, lifetime: 600)
            let body: JSONValue = [
                "access_token": .string("a" + Bytes.hex(SecureRandom.bytes(16))), "token_type": "Bearer",
                "expires_in": 3600, "refresh_token": .string(refresh), "id_token": .string(idToken),
            ]
            return .json(200, body.serialized())
        case "refresh_token"?:
            guard let token = Self.field(form, "refresh_token") else { return Self.oauthError("invalid_request") }
            let entry = state.withLock { $0.refreshTokens[token] }
            guard let entry, !entry.revoked, entry.clientID == clientID else { return Self.oauthError("invalid_grant") }
            let body: JSONValue = [
                "access_token": .string("a" + Bytes.hex(SecureRandom.bytes(16))), "token_type": "Bearer", "expires_in": 3600,
                "id_token": .string(identityToken(for: entry.user, audience: clientID, lifetime: 600)),
            ]
            return .json(200, body.serialized())
        default:
            return Self.oauthError("unsupported_grant_type")
        }
    }

    private func revoke(_ form: [(String, String)]) -> Response {
        if let error = clientError(form) { return Self.oauthError(error) }
        guard let token = Self.field(form, "token") else { return Self.oauthError("invalid_request") }
        let clientID = Self.field(form, "client_id") ?? ""
        if let refusal = state.withLock({ $0.revokeRefusal }) { return Self.oauthError(refusal) }
        state.withLock { s in
            s.revocations.append(Revocation(clientID: clientID, token: token, tokenTypeHint: Self.field(form, "token_type_hint")))
            if s.refreshTokens[token]?.clientID == clientID { s.refreshTokens[token]?.revoked = true }
        }
        return Response(status: 200, contentType: "text/plain", body: [])
    }

    /// Signs in the user of ``setAuthorizeUser(_:firstConsent:)`` and posts back, as Apple's page does after consent.
    private func authorize(_ query: [(String, String)]) -> Response {
        guard let clientID = Self.field(query, "client_id"), clientIDs.contains(clientID),
            let redirect = Self.field(query, "redirect_uri"), let url = URL(string: redirect), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host != nil
        else {
            return Response(status: 400, contentType: "text/plain", body: Array("invalid_client or redirect_uri\n".utf8))
        }
        guard Self.field(query, "response_mode") == "form_post" else {
            return Response(status: 400, contentType: "text/plain", body: Array("response_mode must be form_post\n".utf8))
        }
        let (user, first) = state.withLock { ($0.authorizeUser, $0.firstConsent) }
        let nonce = Self.field(query, "nonce")
        let code = authorizationCode(for: user, clientID: clientID, redirectURI: redirect, nonce: nonce)
        var fields = [("code", code), ("id_token", identityToken(for: user, audience: clientID, nonce: nonce, lifetime: 600))]
        if let state = Self.field(query, "state") { fields.append(("state", state)) }
        if first {
            var userJSON: JSONObject = ["name": ["firstName": .string(user.firstName), "lastName": .string(user.lastName)]]
            if let email = user.email { userJSON["email"] = .string(email) }
            fields.append(("user", JSONValue.object(userJSON).serialized()))
        }
        let inputs = fields.map { #"<input type="hidden" name="\#(Self.html($0.0))" value="\#(Self.html($0.1))">"# }.joined(separator: "\n")
        let page = """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><title>Sign in with Apple (stand-in)</title></head>
            <body onload="document.forms[0].submit()">
            <form method="POST" action="\(Self.html(redirect))">
            \(inputs)
            <noscript><button type="submit">Continue</button></noscript>
            </form></body></html>
            """
        return Response(status: 200, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
    }

    static func html(_ s: String) -> String {
        var out = ""
        for ch in s.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }
}
