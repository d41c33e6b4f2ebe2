import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

/// Code exchange, refresh and revocation against the stand-in over loopback,
/// through the library's URLSession client and its default key fetcher.
@Suite("Apple token endpoint client (loopback stand-in)")
struct ExchangeTests {
    let credentials: AppleClientCredentials
    let standIn: AppleStandIn
    let apple: AppleSignIn
    let user = AppleStandIn.User()

    init() throws {
        credentials = try AppleStandIn.makeCredentials()
        standIn = try AppleStandIn(credentials: credentials, clientIDs: [TokenFixture.clientID, TokenFixture.servicesID])
        try standIn.start()
        let configuration = try SignInWithAppleConfiguration(
            clientIDs: [TokenFixture.clientID, TokenFixture.servicesID], credentials: credentials, baseURL: try #require(standIn.baseURL))
        apple = AppleSignIn(configuration: configuration)
    }

    func refusal(_ body: () async throws -> Void) async -> WebAuthnError? {
        do { try await body(); return nil } catch { return error as? WebAuthnError ?? WebAuthnError("not_a_webauthn_error", "\(error)") }
    }

    @Test("exchange a code: tokens, the id_token verified (keys fetched from /auth/keys) and its sub the code's")
    func exchange() async throws {
        defer { standIn.stop() }
        let code = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        let result = try await apple.exchange(code: code, clientID: TokenFixture.clientID, expectedSub: user.sub)
        #expect(result.identity.sub == user.sub)
        #expect(result.identity.audience == TokenFixture.clientID)
        #expect(result.tokens.tokenType == "Bearer" && result.tokens.expiresIn == 3600)
        #expect(result.tokens.refreshToken != nil)
        #expect(standIn.keySetRequests == 1)
    }

    @Test("a reused code and an unknown code are invalid_grant; another user's sub is refused")
    func invalidGrant() async throws {
        defer { standIn.stop() }
        let code = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        _ = try await apple.exchange(code: code, clientID: TokenFixture.clientID)
        let reused = await refusal { _ = try await apple.exchange(code: code, clientID: TokenFixture.clientID) }
        #expect(reused?.code == .appleRequestRefused)
        #expect(reused?.message.contains("invalid_grant") == true)
        let unknown = await refusal { _ = try await apple.exchange(code: "nope", clientID: TokenFixture.clientID) }
        #expect(unknown?.code == .appleRequestRefused)
        let other = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        let mismatch = await refusal { _ = try await apple.exchange(code: other, clientID: TokenFixture.clientID, expectedSub: "someone.else") }
        #expect(mismatch?.code == .appleTokenClaimInvalid)
        // A code for the app is not the web client's.
        let appCode = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        let wrongClient = await refusal { _ = try await apple.exchange(code: appCode, clientID: TokenFixture.servicesID) }
        #expect(wrongClient?.message.contains("invalid_grant") == true)
        // The refusal's OAuth error, as the server's revocation reads it, from the error this client threw.
        #expect(reused.flatMap(AppleTokenClient.refusal(of:)) == "invalid_grant")
        #expect(mismatch.flatMap(AppleTokenClient.refusal(of:)) == nil, "not a refusal")
        // Apple's `error` string is the client's to quote, bounded; a hostile one reads as itself, cut at a space or colon.
        for (message, expected) in [
            ("Apple's revoke endpoint answered invalid_client (HTTP 400)", "invalid_client"),
            ("Apple's revoke endpoint answered invalid_grant: the token is revoked (HTTP 400)", "invalid_grant"),
            ("Apple's revoke endpoint answered ", ""), ("no marker at all", nil),
            ("Apple's revoke endpoint answered " + String(repeating: "x", count: 64) + " (HTTP 400)", String(repeating: "x", count: 64)),
        ] as [(String, String?)] {
            #expect(AppleTokenClient.refusal(of: WebAuthnError(.appleRequestRefused, message)).map(String.init) == expected, "\(message)")
        }
    }

    @Test("the exchange's identity token must be addressed to the client the code was exchanged for, not any configured one")
    func exchangeAudience() async throws {
        defer { standIn.stop() }
        // Red team: an exchange made as the app took a token addressed to the Services ID.
        standIn.exchangeAudience = TokenFixture.servicesID
        let code = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        let refused = await refusal { _ = try await apple.exchange(code: code, clientID: TokenFixture.clientID, expectedSub: user.sub) }
        #expect(refused?.code == .appleTokenClaimInvalid, "\(String(describing: refused))")
        standIn.exchangeAudience = nil
        let again = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        #expect(try await apple.exchange(code: again, clientID: TokenFixture.clientID, expectedSub: user.sub).identity.audience == TokenFixture.clientID)
    }

    @Test("redirect_uri is sent only when given, form-encoded: a URI with & + = and spaces survives")
    func redirectURI() async throws {
        defer { standIn.stop() }
        let redirect = "https://example.com/apple/callback?a=1&b=x+y z"
        let code = standIn.authorizationCode(for: user, clientID: TokenFixture.servicesID, redirectURI: redirect)
        let missing = await refusal { _ = try await apple.exchange(code: code, clientID: TokenFixture.servicesID) }
        #expect(missing?.code == .appleRequestRefused)
        let code2 = standIn.authorizationCode(for: user, clientID: TokenFixture.servicesID, redirectURI: redirect)
        let ok = try await apple.exchange(code: code2, clientID: TokenFixture.servicesID, redirectURI: redirect)
        #expect(ok.identity.audience == TokenFixture.servicesID)
    }

    @Test("a client secret signed by another key, or for another team, is invalid_client")
    func invalidClient() async throws {
        defer { standIn.stop() }
        for other in [
            try AppleStandIn.makeCredentials(), try AppleClientCredentials(teamID: "OTHERTEAM1", keyID: credentials.keyID, privateKey: credentials.privateKey),
            try AppleClientCredentials(teamID: credentials.teamID, keyID: "OTHERKEY01", privateKey: credentials.privateKey),
        ] {
            let configuration = try SignInWithAppleConfiguration(clientIDs: [TokenFixture.clientID], credentials: other, baseURL: try #require(standIn.baseURL))
            let client = try AppleTokenClient(configuration: configuration)
            let code = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
            let error = await refusal { _ = try await client.exchange(code: code, clientID: TokenFixture.clientID) }
            #expect(error?.code == .appleRequestRefused)
            #expect(error?.message.contains("invalid_client") == true)
        }
    }

    @Test("refresh token validation, revocation recorded, then the refresh token is invalid_grant")
    func refreshAndRevoke() async throws {
        defer { standIn.stop() }
        let code = standIn.authorizationCode(for: user, clientID: TokenFixture.clientID)
        let refresh = try #require(try await apple.exchange(code: code, clientID: TokenFixture.clientID).tokens.refreshToken)
        let client = try apple.tokenClient()
        let validated = try await client.validate(refreshToken: refresh, clientID: TokenFixture.clientID)
        #expect(validated.refreshToken == nil && validated.idToken != nil)
        try await client.revoke(refreshToken: refresh, clientID: TokenFixture.clientID)
        #expect(standIn.revocations == [AppleStandIn.Revocation(clientID: TokenFixture.clientID, token: refresh, tokenTypeHint: "refresh_token")])
        let after = await refusal { _ = try await client.validate(refreshToken: refresh, clientID: TokenFixture.clientID) }
        #expect(after?.message.contains("invalid_grant") == true)
    }

    @Test("no credentials, an unconfigured client id, or nothing listening: typed errors")
    func failures() async throws {
        let base = try #require(standIn.baseURL)
        standIn.stop()
        let bare = try SignInWithAppleConfiguration(clientIDs: [TokenFixture.clientID])
        #expect(throws: WebAuthnError(.configurationInvalid, "")) { try AppleTokenClient(configuration: bare) }
        let client = try apple.tokenClient()
        let unconfigured = await refusal { _ = try await client.exchange(code: "c", clientID: "com.example.unknown") }
        #expect(unconfigured?.code == .configurationInvalid)
        let configuration = try SignInWithAppleConfiguration(clientIDs: [TokenFixture.clientID], credentials: credentials, baseURL: base, requestTimeout: 2)
        let down = await refusal { _ = try await AppleTokenClient(configuration: configuration).exchange(code: "c", clientID: TokenFixture.clientID) }
        #expect(down?.code == .appleEndpointUnavailable)
    }

    @Test("/auth/authorize answers an auto-submitting form_post whose code exchanges with its redirect_uri")
    func authorize() async throws {
        defer { standIn.stop() }
        standIn.setAuthorizeUser(user, firstConsent: true)
        let redirect = "https://rp.example/apple/web/callback"
        var components = URLComponents(url: try #require(standIn.baseURL).appendingPathComponent("auth/authorize"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "client_id", value: TokenFixture.servicesID), URLQueryItem(name: "redirect_uri", value: redirect),
            URLQueryItem(name: "response_type", value: "code id_token"), URLQueryItem(name: "response_mode", value: "form_post"),
            URLQueryItem(name: "scope", value: "name email"), URLQueryItem(name: "state", value: "st<ate>"), URLQueryItem(name: "nonce", value: "n1"),
        ]
        let (data, response) = try await URLSession.shared.data(from: try #require(components.url))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let page = String(decoding: data, as: UTF8.self)
        #expect(page.contains(#"action="https://rp.example/apple/web/callback""#))
        #expect(page.contains("document.forms[0].submit()"))
        #expect(page.contains(#"name="state" value="st&lt;ate&gt;""#))
        #expect(page.contains(#"name="user""#))
        func value(_ name: String) -> String? {
            guard let start = page.range(of: #"name="\#(name)" value=""#) else { return nil }
            return String(page[start.upperBound...].prefix { $0 != "\"" })
        }
        let idToken = try #require(value("id_token"))
        let identity = try await apple.verifyIdentityToken(idToken, nonce: "n1")
        #expect(identity.sub == user.sub)
        let code = try #require(value("code"))
        let exchanged = try await apple.exchange(code: code, clientID: TokenFixture.servicesID, redirectURI: redirect, expectedSub: user.sub)
        #expect(exchanged.identity.sub == user.sub)
    }

    @Test("the default fetcher: /auth/keys over loopback, the last good set kept when it answers 503")
    func fetcher() async throws {
        defer { standIn.stop() }
        let fetcher = AppleHTTPKeyFetcher(configuration: apple.configuration)
        let set = try AppleKeySet(json: try await fetcher.fetchKeySet())
        #expect(set.keyIDs == [standIn.currentKeyID])
        standIn.keysAvailable = false
        await #expect(throws: (any Error).self) { _ = try await fetcher.fetchKeySet() }
    }
}
