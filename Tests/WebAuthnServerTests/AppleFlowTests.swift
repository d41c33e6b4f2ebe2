import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Hummingbird
import SignInWithApple
import Synchronization
import Testing
import WebAuthnCore
import WebAuthnServer
import WebAuthnSQLite
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Sign in with Apple through the server (in-process, SQLite, over loopback HTTP)
/// against the Apple stand-in: the native flow, replay, a failed exchange,
/// notifications, account deletion with revocation, and the web flow.
@Suite("Sign in with Apple through the server", .serialized)
struct AppleFlowTests {
    static let clientID = "com.example.app", servicesID = "com.example.web"

    /// A browser or app: keeps the cookies the server sets.
    final class Client: @unchecked Sendable {
        let port: Int
        var cookies: [String: String] = [:]
        init(port: Int) { self.port = port }

        func send(_ path: String, method: String = "POST", json: String? = nil, form: String? = nil, headers: [String: String] = [:]) async throws -> (
            status: Int, body: JSONValue, location: String?
        ) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = method
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            if let json { request.httpBody = Data(json.utf8); request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
            if let form { request.httpBody = Data(form.utf8); request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type") }
            if !cookies.isEmpty { request.setValue(cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; "), forHTTPHeaderField: "Cookie") }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpShouldSetCookies = false
            let session = URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
            let (data, response) = try await session.data(for: request)
            let http = response as! HTTPURLResponse
            if let set = http.value(forHTTPHeaderField: "Set-Cookie") {
                for cookie in set.components(separatedBy: ", ") {
                    let pair = cookie.split(separator: ";")[0].split(separator: "=", maxSplits: 1).map(String.init)
                    if pair.count == 2 { if pair[1].isEmpty { cookies.removeValue(forKey: pair[0]) } else { cookies[pair[0]] = pair[1] } }
                }
            }
            return (
                http.statusCode, (try? JSONValue.parse([UInt8](data))) ?? .string(String(decoding: data, as: UTF8.self)),
                http.value(forHTTPHeaderField: "Location")
            )
        }
    }

    final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) { completionHandler(nil) }
    }

    struct Setup {
        let standIn: AppleStandIn
        let store: SQLiteStore
        let path: String
        /// The server secret.
        let secret: [UInt8]
        /// The server's accounts and identities when the test asked for hooks.
        var interleaving: Interleaving? = nil
    }

    /// Runs the server with Sign in with Apple against a fresh stand-in and SQLite store.
    static func withServer(
        rateLimit: RateLimit? = nil, clock: WebAuthnClock = .system, appleClock: WebAuthnClock = .system,
        limits: WebAuthnEngine.Limits = WebAuthnEngine.Limits(), interleaving: Bool = false, _ body: (Setup, Int) async throws -> Void
    ) async throws {
        let credentials = try AppleStandIn.makeCredentials()
        let secret = SecureRandom.bytes(32)
        let standIn = try AppleStandIn(credentials: credentials, clientIDs: [clientID, servicesID])
        let applePort = try standIn.start()
        defer { standIn.stop() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("apple-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try await SQLiteStore.open(path: path)
        // The server's accounts and identities: the store, or the store with hooks (``Interleaving``).
        let interleaved = interleaving ? Interleaving(store) : nil
        let accounts: any AccountStore & LinkedIdentityStore = interleaved ?? store
        let rp = try RelyingParty(id: "localhost", name: "Test", origins: ["http://localhost"], clock: clock)
        let engine = WebAuthnEngine(relyingParty: rp, credentials: store, challenges: store, accounts: store, limits: limits)
        let apple = try SignInWithAppleConfiguration(
            clientIDs: [clientID, servicesID], credentials: credentials,
            baseURL: URL(string: "http://127.0.0.1:\(applePort)")!)
        let configuration = ServerConfiguration(
            demo: true, secret: secret, rateLimit: rateLimit,
            apple: AppleConfiguration(
                signIn: AppleSignIn(configuration: apple, clock: appleClock), identities: accounts, servicesID: servicesID,
                redirectURI: "http://127.0.0.1/apple/web/callback"))
        try await EmbeddingTests.serving({ running in
            try buildApplication(
                engine: engine, accounts: accounts, sessions: interleaved ?? store,
                configuration: ApplicationConfiguration(
                    port: 0, routes: configuration, onServerRunning: running))
        }) { port in try await body(Setup(standIn: standIn, store: store, path: path, secret: secret, interleaving: interleaved), port) }
        try await store.close()
    }

    static func signInBody(_ setup: Setup, user: AppleStandIn.User, nonce: String, audience: String = clientID, code: String? = nil) -> String {
        let token = setup.standIn.identityToken(for: user, audience: audience, nonce: nonce)
        let code = code ?? setup.standIn.authorizationCode(for: user, clientID: audience)
        return JSONValue.object([
            "identityToken": .string(token), "authorizationCode": .string(code),
            "user": ["name": ["firstName": "Ada", "lastName": "Lovelace"]],
        ]).serialized()
    }

    @Test("native: nonce, sign-in creates the account once, a replayed token fails, the same user signs in again, SHA-256 nonces work")
    func nativeFlow() async throws {
        try await Self.withServer { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User(email: "ada@example.com")
            let issued = try await app.send("/apple/nonce", json: "{}")
            let nonce = try #require(issued.body["nonce"]?.stringValue)
            #expect(issued.body["nonceSHA256"]?.stringValue == Bytes.hex(Digest.sha256(Array(nonce.utf8))))
            let body = Self.signInBody(setup, user: user, nonce: nonce)
            let first = try await app.send("/apple/signin", json: body)
            #expect(first.status == 200, "\(first.body)")
            #expect(first.body["created"]?.boolValue == true && first.body["sub"]?.stringValue == user.sub)
            let session = try await app.send("/demo/session", method: "GET")
            // Named from the subject, not by the email (red team, thirteenth pass: sign-up's 409 for a
            // taken name told anyone whether an email had an account); the user data names it for display.
            #expect(session.body["user"]?.stringValue?.hasPrefix("apple-") == true && session.body["displayName"]?.stringValue == "Ada Lovelace")
            let probe = try await Client(port: port).send("/attestation/options", json: #"{"username": "ADA@example.com"}"#)
            #expect(probe.status == 200, "sign-up does not say the email has an account: \(probe.body)")
            // The same token again: its nonce is spent.
            let replay = try await app.send("/apple/signin", json: body)
            #expect(replay.status == 400 && replay.body["errorMessage"]?.stringValue?.hasPrefix("challenge_unknown") == true, "\(replay.body)")
            // A new nonce, sent to Apple as its SHA-256: the same account, not a new one.
            let again = try await app.send("/apple/nonce", json: "{}")
            let hashed = try #require(again.body["nonceSHA256"]?.stringValue)
            let second = try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: hashed))
            #expect(second.status == 200 && second.body["created"]?.boolValue == false, "\(second.body)")
            let linked = try #require(try await setup.store.identity(provider: "apple", subject: user.sub))
            #expect(linked.refreshToken != nil && linked.refreshToken?.count ?? 0 > 28)
            // The refresh token is sealed at rest: not the plain token.
            #expect(!String(decoding: linked.refreshToken ?? [], as: UTF8.self).contains("r."))
        }
    }

    @Test("native: a nonce from another session, no nonce, no code, or a failed exchange sign nobody in and store nothing")
    func nativeRefusals() async throws {
        try await Self.withServer { setup, port in
            let app = Client(port: port), other = Client(port: port)
            let user = AppleStandIn.User()
            let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            let stolen = try await other.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce))
            #expect(stolen.body["errorMessage"]?.stringValue?.hasPrefix("session_mismatch") == true, "\(stolen.body)")
            let fresh = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            let badCode = try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: fresh, code: "not-a-code"))
            #expect(badCode.status >= 400 && badCode.body["errorMessage"]?.stringValue?.hasPrefix("apple_request_refused") == true, "\(badCode.body)")
            let token = setup.standIn.identityToken(for: user, audience: Self.clientID)
            let noNonce = try await app.send(
                "/apple/signin",
                json: JSONValue.object([
                    "identityToken": .string(token),
                    "authorizationCode": .string(setup.standIn.authorizationCode(for: user, clientID: Self.clientID)),
                ]).serialized())
            #expect(noNonce.body["errorMessage"]?.stringValue?.hasPrefix("apple_nonce_mismatch") == true, "\(noNonce.body)")
            let noCode = try await app.send("/apple/signin", json: JSONValue.object(["identityToken": .string(token)]).serialized())
            #expect(noCode.status == 400 && noCode.body["errorMessage"]?.stringValue?.hasPrefix("request_malformed") == true, "\(noCode.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: user.sub) == nil)
            #expect(try await app.send("/demo/session", method: "GET").body["user"] == .null)
        }
    }

    @Test("notifications: consent revoked unlinks and signs out; either removes an Apple-only account; duplicates are fine")
    func notifications() async throws {
        try await Self.withServer { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User(email: "nora@example.com")
            let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            #expect(try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: user.sub)?.userHandle)
            func post(_ type: String, asString: Bool, sub: String? = nil) async throws -> Int {
                let event: JSONObject = [
                    "type": .string(type), "sub": .string(sub ?? user.sub), "event_time": .number(Date().timeIntervalSince1970 * 1000),
                ]
                let events: JSONValue = asString ? .string(JSONValue.object(event).serialized()) : .object(event)
                let claims: JSONValue = [
                    "iss": "https://appleid.apple.com", "aud": .string(Self.clientID), "iat": .number(Date().timeIntervalSince1970.rounded()),
                    "jti": .string(UUID().uuidString), "events": events,
                ]
                let payload = setup.standIn.token(claimsJSON: claims.serialized())
                return try await Client(port: port).send("/apple/notifications", json: JSONValue.object(["payload": .string(payload)]).serialized()).status
            }
            #expect(try await post("email-disabled", asString: true) == 200)
            // Consent revoked for an Apple-only account: unlinked, signed out, and the account, which
            // nothing could sign in to any more, deleted.
            let other = Client(port: port), revoking = AppleStandIn.User()
            let otherNonce = try #require(try await other.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            #expect(try await other.send("/apple/signin", json: Self.signInBody(setup, user: revoking, nonce: otherNonce)).status == 200)
            let revokingHandle = try #require(try await setup.store.identity(provider: "apple", subject: revoking.sub)?.userHandle)
            #expect(try await post("consent-revoked", asString: false, sub: revoking.sub) == 200)
            #expect(try await setup.store.identity(provider: "apple", subject: revoking.sub) == nil)
            #expect(try await setup.store.account(handle: revokingHandle) == nil)
            #expect(try await other.send("/demo/session", method: "GET").body["user"] == .null)
            #expect(try await post("account-delete", asString: false) == 200)
            #expect(try await setup.store.identity(provider: "apple", subject: user.sub) == nil)
            #expect(try await setup.store.account(handle: handle) == nil)
            #expect(try await app.send("/demo/session", method: "GET").body["user"] == .null)
            #expect(try await post("account-deleted", asString: true) == 200)  // a duplicate, another spelling
            let forged = try await Client(port: port).send("/apple/notifications", json: #"{"payload":"a.b.c"}"#)
            #expect(forged.status == 400)
        }
    }

    @Test("deleting an account revokes its Apple refresh token first, then removes it")
    func deletionRevokes() async throws {
        try await Self.withServer { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User()
            let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            #expect(try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: user.sub)?.userHandle)
            let deleted = try await app.send("/demo/account", method: "DELETE")
            #expect(deleted.status == 200, "\(deleted.body)")
            #expect(setup.standIn.revocations.count == 1 && setup.standIn.revocations.first?.clientID == Self.clientID)
            #expect(try await setup.store.account(handle: handle) == nil)
            #expect(try await app.send("/demo/session", method: "GET").body["user"] == .null)
            // Red team, twelfth pass: a token sealed under another server secret (changed, or another
            // instance's) cannot be opened; the deletion answered 500 and kept the account for good.
            let other = Client(port: port), stranger = AppleStandIn.User()
            let second = try #require(try await other.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            #expect(try await other.send("/apple/signin", json: Self.signInBody(setup, user: stranger, nonce: second)).status == 200)
            var identity = try #require(try await setup.store.identity(provider: "apple", subject: stranger.sub))
            identity.refreshToken = try Seal.seal(Array("rt".utf8), key: SecureRandom.bytes(32), associated: Array("apple/\(stranger.sub)".utf8))
            #expect(try await setup.store.update(identity))
            let resealed = try await other.send("/demo/account", method: "DELETE")
            #expect(resealed.status == 200, "\(resealed.body)")
            #expect(try await setup.store.account(handle: identity.userHandle) == nil)
            #expect(try await setup.store.identity(provider: "apple", subject: stranger.sub) == nil)
            #expect(setup.standIn.revocations.count == 1, "nothing to revoke with")
        }
    }

    @Test("linking a new Apple ID to a signed-in account needs a recent verification, in both flows; an Apple ID already linked signs in")
    func linkingNeedsStepUp() async throws {
        // Red team: a stolen session, too old to delete a passkey, linked the thief's Apple ID,
        // came back verified, and deleted the victim's passkeys; the thief's Apple ID then signed in.
        let offset = Mutex<TimeInterval>(0)
        try await Self.withServer(clock: WebAuthnClock { Date().addingTimeInterval(offset.withLock { $0 }) }) { setup, port in
            let app = Client(port: port)
            func signIn(_ user: AppleStandIn.User) async throws -> (status: Int, body: JSONValue) {
                let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                let reply = try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce))
                return (reply.status, reply.body)
            }
            let owner = AppleStandIn.User(), second = AppleStandIn.User(), thief = AppleStandIn.User()
            #expect(try await signIn(owner).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: owner.sub)?.userHandle)
            // Within the window the owner links a second Apple ID.
            let linked = try await signIn(second)
            #expect(linked.status == 200 && linked.body["created"]?.boolValue == false, "\(linked.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: second.sub)?.userHandle == handle)
            offset.withLock { $0 = 400 }  // past the 300 s window: the session is signed in, no longer recent
            let exchanges = setup.standIn.codeExchanges
            let refused = try await signIn(thief)
            #expect(refused.status == 401 && refused.body["errorMessage"]?.stringValue?.hasPrefix("reauthentication_required") == true, "\(refused.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: thief.sub) == nil)
            #expect(setup.standIn.codeExchanges == exchanges, "refused before the code is exchanged")
            #expect(try await app.send("/demo/session", method: "GET").body["recentlyVerified"]?.boolValue == false)
            // The web flow, from the same stale session.
            let start = try await app.send("/apple/web/start", method: "GET")
            let location = try #require(start.location.flatMap(URLComponents.init(string:)))
            let state = try #require(location.queryItems?.first { $0.name == "state" }?.value)
            let nonce = try #require(location.queryItems?.first { $0.name == "nonce" }?.value)
            func enc(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }
            let token = setup.standIn.identityToken(for: thief, audience: Self.servicesID, nonce: nonce)
            let code = setup.standIn.authorizationCode(for: thief, clientID: Self.servicesID, redirectURI: "http://127.0.0.1/apple/web/callback")
            let web = try await app.send("/apple/web/callback", form: "code=\(enc(code))&id_token=\(enc(token))&state=\(enc(state))")
            #expect(web.status == 401 && web.body["errorMessage"]?.stringValue?.hasPrefix("reauthentication_required") == true, "\(web.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: thief.sub) == nil)
            // An Apple ID the account already holds is a way in: it signs in, and verifies the session.
            let again = try await signIn(second)
            #expect(again.status == 200 && again.body["created"]?.boolValue == false, "\(again.body)")
            #expect(try await app.send("/demo/session", method: "GET").body["recentlyVerified"]?.boolValue == true)
        }
    }

    @Test("web: start redirects to Apple with state and nonce; the form post back signs the browser in once; a used or foreign state fails")
    func webFlow() async throws {
        try await Self.withServer { setup, port in
            let browser = Client(port: port)
            let start = try await browser.send("/apple/web/start", method: "GET")
            #expect(start.status == 302)
            let location = try #require(start.location.flatMap(URLComponents.init(string:)))
            func item(_ name: String) -> String? { location.queryItems?.first { $0.name == name }?.value }
            #expect(item("client_id") == Self.servicesID && item("response_mode") == "form_post" && item("response_type") == "code id_token")
            let state = try #require(item("state")), nonce = try #require(item("nonce"))
            let user = AppleStandIn.User(email: "web@example.com")
            let token = setup.standIn.identityToken(for: user, audience: Self.servicesID, nonce: nonce)
            let code = setup.standIn.authorizationCode(for: user, clientID: Self.servicesID, redirectURI: "http://127.0.0.1/apple/web/callback")
            func form(_ state: String) -> String {
                func enc(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }
                return "code=\(enc(code))&id_token=\(enc(token))&state=\(enc(state))"
            }
            // Another browser (no flow cookie) can neither finish this flow nor spend its state.
            let foreign = try await Client(port: port).send("/apple/web/callback", form: form(state))
            #expect(foreign.status == 403 && foreign.body["errorMessage"]?.stringValue?.hasPrefix("session_mismatch") == true, "\(foreign.body)")
            let done = try await browser.send("/apple/web/callback", form: form(state))
            #expect(done.status == 303 && done.location == "/", "\(done.body)")
            let signedIn = try await browser.send("/demo/session", method: "GET").body
            #expect(signedIn["user"]?.stringValue?.hasPrefix("apple-") == true && signedIn["displayName"]?.stringValue == "web@example.com", "\(signedIn)")
            #expect(try await browser.send("/apple/web/callback", form: form(state)).status >= 400)  // used once
        }
    }

    @Test("notifications: a duplicate, a replay after the user linked again, an event from before the link, or one from the future change nothing")
    func notificationReplay() async throws {
        try await Self.withServer { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User(email: "rita@example.com")
            func signIn() async throws -> Int {
                let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                return try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status
            }
            func notification(_ type: String, jti: String, at time: Date) -> String {
                let event: JSONObject = ["type": .string(type), "sub": .string(user.sub), "event_time": .number((time.timeIntervalSince1970 * 1000).rounded())]
                let claims: JSONValue = [
                    "iss": "https://appleid.apple.com", "aud": .string(Self.clientID), "iat": .number(Date().timeIntervalSince1970.rounded()),
                    "jti": .string(jti), "events": .string(JSONValue.object(event).serialized()),
                ]
                return JSONValue.object(["payload": .string(setup.standIn.token(claimsJSON: claims.serialized()))]).serialized()
            }
            func linked() async throws -> Bool { try await setup.store.identity(provider: "apple", subject: user.sub) != nil }
            #expect(try await signIn() == 200)
            let revoked = notification("consent-revoked", jti: "n-1", at: Date())
            #expect(try await Client(port: port).send("/apple/notifications", json: revoked).status == 200)
            #expect(try await linked() == false)
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await signIn() == 200)  // the user comes back: linked again
            #expect(try await linked())
            // The same notification again (Apple's duplicate, or a replay): 200, nothing changes.
            #expect(try await Client(port: port).send("/apple/notifications", json: revoked).status == 200)
            // Another one dated before the new link: superseded.
            let old = notification("account-delete", jti: "n-2", at: Date().addingTimeInterval(-120))
            #expect(try await Client(port: port).send("/apple/notifications", json: old).status == 200)
            // One dated after the link but before the user's latest sign-in, delivered late: superseded
            // (red team, thirteenth pass: it deleted the account the user had just signed in to).
            let between = Date()
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await signIn() == 200)
            #expect(try await Client(port: port).send("/apple/notifications", json: notification("consent-revoked", jti: "n-4", at: between)).status == 200)
            // One from the future: refused.
            let future = notification("consent-revoked", jti: "n-3", at: Date().addingTimeInterval(86_400))
            let refused = try await Client(port: port).send("/apple/notifications", json: future)
            #expect(refused.status == 400 && refused.body["errorMessage"]?.stringValue?.hasPrefix("apple_notification_invalid") == true, "\(refused.body)")
            #expect(try await linked())
            // Still signed in (consent-revoked would have ended the sessions).
            #expect(try await app.send("/demo/session", method: "GET").body["user"] != .null)
        }
    }

    @Test("a flood of Apple nonces on a full engine drops the oldest ceremonies, not every WebAuthn ceremony first")
    func nonceFloodKeepsSignIns() async throws {
        // Red team (eleventh pass): nonces lived 10 minutes and WebAuthn challenges 5; a full engine drops
        // the ceremonies that expire first, so a stranger's flood of nonces from many addresses dropped
        // each sign-in as soon as it started. A nonce now lives no longer than a challenge.
        try await Self.withServer(limits: WebAuthnEngine.Limits(maxPendingCeremonies: 200)) { setup, port in
            func flood(_ count: Int) async throws {
                for _ in 0..<count { #expect(try await Client(port: port).send("/apple/nonce", json: "{}").status == 200) }
            }
            try await flood(200)
            let browser = Client(port: port)
            let options = try await browser.send("/assertion/options", json: "{}")
            let challenge = try #require(options.body["challenge"]?.stringValue.flatMap(Base64URL.decode), "\(options.body)")
            try await flood(50)
            #expect(try await setup.store.pending(challenge: challenge) != nil, "the sign-in started before the last 50 nonces was dropped")
        }
    }

    @Test("notifications: a revocation without exp or event_time replayed hours later, after the user linked again, changes nothing")
    func notificationReplayLater() async throws {
        // Red team: the dedupe key was kept an hour and a notification without exp had no age limit,
        // so a captured consent-revoked replayed after that hour unlinked the user's new link.
        let offset = Mutex<TimeInterval>(0)
        let clock = WebAuthnClock { Date().addingTimeInterval(offset.withLock { $0 }) }
        try await Self.withServer(clock: clock, appleClock: clock) { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User()
            func signIn() async throws -> Int {
                let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                return try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status
            }
            func revocation(jti: String) -> String {
                let event: JSONObject = ["type": "consent-revoked", "sub": .string(user.sub)]
                let claims: JSONValue = [
                    "iss": "https://appleid.apple.com", "aud": .string(Self.clientID), "iat": .number(Date().timeIntervalSince1970.rounded()),
                    "jti": .string(jti), "events": .string(JSONValue.object(event).serialized()),
                ]
                return JSONValue.object(["payload": .string(setup.standIn.token(claimsJSON: claims.serialized()))]).serialized()
            }
            let revoked = revocation(jti: "n-later")
            func linked() async throws -> Bool { try await setup.store.identity(provider: "apple", subject: user.sub) != nil }
            // One that arrives while the Apple ID is linked to nothing (after the user deleted the
            // account, say) is remembered too: replayed once the user has signed up again, it does nothing.
            let early = revocation(jti: "n-early")
            #expect(try await Client(port: port).send("/apple/notifications", json: early).status == 200)
            #expect(try await signIn() == 200)
            #expect(try await Client(port: port).send("/apple/notifications", json: early).status == 200)
            #expect(try await linked(), "a notification from before the link, replayed, unlinked it")
            #expect(try await Client(port: port).send("/apple/notifications", json: revoked).status == 200)
            #expect(try await linked() == false)
            #expect(try await signIn() == 200)
            #expect(try await linked())
            for hours in [2.0, 23.0] {
                offset.withLock { $0 = hours * 3600 }
                #expect(try await Client(port: port).send("/apple/notifications", json: revoked).status == 200, "\(hours) h")
                #expect(try await linked(), "replayed \(hours) h later")
            }
            offset.withLock { $0 = AppleNotification.maxAge + 600 }
            let late = try await Client(port: port).send("/apple/notifications", json: revoked)
            #expect(late.status == 400 && late.body["errorMessage"]?.stringValue?.hasPrefix("apple_token_expired") == true, "\(late.body)")
            #expect(try await linked())
        }
    }

    @Test(
        "Apple refusing the revocation: invalid_grant from every client id (no valid token left) deletes the account; invalid_client answers 502 and keeps it")
    func revocationRefused() async throws {
        try await Self.withServer { setup, port in
            func signedIn(_ user: AppleStandIn.User) async throws -> (Client, [UInt8]) {
                let app = Client(port: port)
                let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                #expect(try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status == 200)
                return (app, try #require(try await setup.store.identity(provider: "apple", subject: user.sub)?.userHandle))
            }
            let (kept, keptHandle) = try await signedIn(AppleStandIn.User())
            setup.standIn.revokeRefusal = "invalid_client"
            let refused = try await kept.send("/demo/account", method: "DELETE")
            let message = refused.body["errorMessage"]?.stringValue ?? ""
            #expect(refused.status == 502 && message.hasPrefix("apple_endpoint_unavailable") && !message.contains("invalid_client"), "\(refused.body)")
            #expect(try await setup.store.account(handle: keptHandle) != nil)
            // Red team: an endpoint answering invalid_grant for every client id kept the account for ever.
            setup.standIn.revokeRefusal = "invalid_grant"
            let (gone, goneHandle) = try await signedIn(AppleStandIn.User())
            let deleted = try await gone.send("/demo/account", method: "DELETE")
            #expect(deleted.status == 200, "\(deleted.body)")
            #expect(try await setup.store.account(handle: goneHandle) == nil)
            #expect(try await kept.send("/demo/account", method: "DELETE").status == 200)
        }
    }

    @Test("Apple unreachable: 502 with a generic message (the upstream's address stays in the log), and nothing deleted")
    func upstreamDown() async throws {
        try await Self.withServer { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User()
            let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            #expect(try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status == 200)
            let applePort = try #require(setup.standIn.port)
            setup.standIn.stop()
            let deleted = try await app.send("/demo/account", method: "DELETE")
            let message = deleted.body["errorMessage"]?.stringValue ?? ""
            #expect(deleted.status == 502 && message.hasPrefix("apple_endpoint_unavailable"), "\(deleted.body)")
            #expect(!message.contains("127.0.0.1") && !message.contains(String(applePort)) && !message.contains("/auth/"), "\(message)")
            #expect(try await setup.store.identity(provider: "apple", subject: user.sub) != nil)
        }
    }

    @Test("Apple's key endpoint failing: 502 with a generic message, not the upstream's detail, and not counted as the client's failure")
    func keysDown() async throws {
        let offset = Mutex<TimeInterval>(0)
        try await Self.withServer(rateLimit: RateLimit(), appleClock: WebAuthnClock { Date().addingTimeInterval(offset.withLock { $0 }) }) { setup, port in
            let app = Client(port: port)
            setup.standIn.keysAvailable = false
            let user = AppleStandIn.User()
            let applePort = try #require(setup.standIn.port)
            // More attempts than the session's allowance of failures (5): none counts against it.
            for _ in 0..<7 {
                let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                let reply = try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce))
                let message = reply.body["errorMessage"]?.stringValue ?? ""
                #expect(reply.status == 502 && message.hasPrefix("apple_jwks_unavailable"), "\(reply.body)")
                #expect(!message.contains("127.0.0.1") && !message.contains(String(applePort)) && !message.contains("/auth/"), "\(message)")
            }
            setup.standIn.keysAvailable = true
            offset.withLock { $0 = 6 }  // past the key cache's 5 s between fetches while it holds no set
            let nonce = try #require(try await app.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            let signedIn = try await app.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce))
            #expect(signedIn.status == 200, "\(signedIn.body)")
        }
    }

    @Test("one address cannot pile up pending starts with a session cookie, nor flood /demo routes")
    func startsPerAddress() async throws {
        try await Self.withServer(rateLimit: RateLimit(perAddress: 2, perSession: 1000)) { setup, port in
            let browser = Client(port: port)
            #expect(try await browser.send("/apple/nonce", json: "{}").status == 200)  // a session cookie
            var started = 0, limited = 0
            let begin = Date()
            for _ in 0..<60 {
                switch try await browser.send("/apple/web/start", method: "GET").status {
                case 302: started += 1
                case 429: limited += 1
                default: break
                }
            }
            // The starts bucket holds 20 and refills at 2/s, whatever the session's own budget (the
            // bound allows for the time the 60 requests took, on a loaded machine).
            let allowed = 20 + Int((2 * Date().timeIntervalSince(begin)).rounded(.up)) + 1
            #expect(allowed < 60, "the 60 starts took too long to test the limit")
            #expect(started <= allowed && started + limited == 60 && limited >= 60 - allowed, "started \(started), limited \(limited), allowed \(allowed)")
            var logouts = 0
            for _ in 0..<60 where try await Client(port: port).send("/demo/logout", json: "{}").status == 429 { logouts += 1 }
            #expect(logouts >= 25, "\(logouts)")
        }
    }
}
