import Foundation
import Testing
import WebAuthnTesting
import _WebAuthnCrypto
import _WebAuthnEncoding

extension AppleFlowTests {
    /// Starts the web flow from `browser` and answers, as Apple would for a new user: the form to
    /// post to `/apple/web/callback`.
    static func webFlowForm(_ browser: Client, _ setup: Setup, user: AppleStandIn.User = AppleStandIn.User()) async throws -> String {
        let start = try await browser.send("/apple/web/start", method: "GET")
        let location = try #require(start.location.flatMap(URLComponents.init(string:)))
        func item(_ name: String) -> String? { location.queryItems?.first { $0.name == name }?.value }
        let state = try #require(item("state")), nonce = try #require(item("nonce"))
        let token = setup.standIn.identityToken(for: user, audience: Self.servicesID, nonce: nonce)
        let code = setup.standIn.authorizationCode(for: user, clientID: Self.servicesID, redirectURI: "http://127.0.0.1/apple/web/callback")
        func enc(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }
        return "code=\(enc(code))&id_token=\(enc(token))&state=\(enc(state))"
    }

    @Test("web: the callback ends the session the browser had when it started the flow, though Apple's cross-site post does not bring its cookie")
    func webFlowEndsPreviousSession() async throws {
        // Red team, thirteenth pass: the form post is cross-site, so the SameSite=Strict session
        // cookie never came with it; the old session stayed signed in (and verified) for its whole
        // lifetime, and the browser, holding the new cookie, could not end it.
        try await Self.withServer { setup, port in
            let browser = Client(port: port)
            #expect(try await Self.appleSignIn(browser, setup, AppleStandIn.User()).status == 200)
            let before = browser.cookies
            let form = try await Self.webFlowForm(browser, setup)
            // Apple's post, as a browser sends it cross-site: the flow cookie only.
            let post = Client(port: port)
            post.cookies = browser.cookies.filter { $0.key.contains("apple_flow") }
            #expect(post.cookies.count == 1)
            let done = try await post.send("/apple/web/callback", form: form)
            #expect(done.status == 303, "\(done.body)")
            #expect(try await post.send("/demo/session", method: "GET").body["user"]?.stringValue != nil, "the new session is signed in")
            let old = Client(port: port)
            old.cookies = before
            #expect(try await old.send("/demo/session", method: "GET").body["user"] == .null, "the session the flow started from has ended")
            // Deleting the account revokes the web flow's token with the Services ID it was issued to
            // (red team, thirteenth pass: it was tried with the bundle ID first, which an endpoint may
            // answer 200 for and revoke nothing).
            #expect(try await post.send("/demo/account", method: "DELETE").status == 200)
            #expect(setup.standIn.revocations.map(\.clientID) == [Self.servicesID], "\(setup.standIn.revocations)")
        }
    }

    @Test("web: a flow cookie changed to name another session fails the state, and ends nothing")
    func webFlowCookieTampered() async throws {
        try await Self.withServer { setup, port in
            let victim = Client(port: port)
            #expect(try await Self.appleSignIn(victim, setup, AppleStandIn.User()).status == 200)
            let attacker = Client(port: port)
            let form = try await Self.webFlowForm(attacker, setup)
            // The attacker appends 32 bytes (any session's id hash) to their own flow cookie.
            let name = try #require(attacker.cookies.keys.first { $0.contains("apple_flow") })
            let flow = try #require(attacker.cookies[name].flatMap { Base64URL.decode($0) })
            attacker.cookies[name] = Base64URL.encode(flow + [UInt8](repeating: 7, count: 32))
            let refused = try await attacker.send("/apple/web/callback", form: form)
            #expect(refused.status == 403, "\(refused.body)")
            #expect(try await victim.send("/demo/session", method: "GET").body["user"]?.stringValue != nil)
        }
    }

    @Test("a refresh token sealed before its client id was kept is revoked with every client id, not only the first that answers 200")
    func legacyTokenRevokedWithEveryClientID() async throws {
        // Red team, thirteenth pass (re-check): such a token of the Services ID was sent with the
        // bundle ID only, which the endpoint answered 200 for, and it still refreshed afterwards.
        try await Self.withServer { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User()
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            var identity = try #require(try await setup.store.identity(provider: "apple", subject: user.sub))
            let key = Digest.hmacSHA256(key: setup.secret, Array("apple refresh token".utf8))
            identity.refreshToken = try Seal.seal(Array("legacy-token".utf8), key: key, associated: Array("apple/\(user.sub)".utf8))
            #expect(try await setup.store.update(identity))
            #expect(try await app.send("/demo/account", method: "DELETE").status == 200)
            let sent = setup.standIn.revocations
            #expect(sent.map(\.clientID) == [Self.clientID, Self.servicesID] && sent.allSatisfy { $0.token == "legacy-token" }, "\(sent)")
        }
    }

    @Test("an Apple ID that signed in through the web and the app keeps a token of each client id, and deletion revokes both, each with its own")
    func tokenOfEachClientID() async throws {
        // Red team, thirteenth pass (re-check): the app's sign-in replaced the web flow's token,
        // which was then never revoked (2 tokens issued, 1 revoked).
        try await Self.withServer { setup, port in
            let user = AppleStandIn.User()
            let browser = Client(port: port)
            let form = try await Self.webFlowForm(browser, setup, user: user)
            #expect(try await browser.send("/apple/web/callback", form: form).status == 303)
            let app = Client(port: port)
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            #expect(try await app.send("/demo/account", method: "DELETE").status == 200)
            let sent = setup.standIn.revocations
            #expect(Set(sent.map(\.clientID)) == [Self.clientID, Self.servicesID] && Set(sent.map(\.token)).count == 2, "\(sent)")
        }
    }
}
