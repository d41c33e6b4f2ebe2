import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Hummingbird
import Testing
import WebAuthnCore
import WebAuthnServer
import WebAuthnSQLite
import WebAuthnTesting
import _WebAuthnEncoding

/// The server as a library, in-process: the README's mounting example (verbatim
/// between the markers; DocumentationTests checks the README holds the same
/// text) and `buildApplication`, which `webauthn serve` runs.
@Suite("Embedding the server", .serialized)
struct EmbeddingTests {
    static func fetch(_ port: Int, _ path: String, post body: String? = nil) async throws -> (status: Int, body: String, headers: [String: String]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        if let body {
            request.httpMethod = "POST"
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        let http = response as! HTTPURLResponse
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields { if let n = name as? String, let v = value as? String { headers[n.lowercased()] = v } }
        return (http.statusCode, String(decoding: data, as: UTF8.self), headers)
    }

    /// Runs `app` until `body` returns, with the port it bound.
    static func serving(
        _ build: (@escaping @Sendable (Int) async -> Void) throws -> some ApplicationProtocol,
        _ body: (Int) async throws -> Void
    ) async throws {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = try build { continuation.yield($0) }
        let task = Task { try await app.runService() }
        defer { task.cancel() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { Issue.record("the server did not start"); return }
        try await body(port)
    }

    @Test("the README's mounting example: routes under the host's prefix, no middleware on the host's own routes")
    func mountingExample() async throws {
        let path = ServeProcess.temporaryDatabase()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let secret = Array(repeating: UInt8(ascii: "s"), count: 32)
        @Sendable func signedInUser(_ request: Request) async -> [UInt8]? { nil }

        // --- README: mount ---
        let store = try await SQLiteStore.open(path: path)
        let rp = try RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
        let engine = WebAuthnEngine(relyingParty: rp, credentials: store, challenges: store, accounts: store)
        let webauthn = try WebAuthnRoutes(
            engine: engine, accounts: store, sessions: store,
            configuration: ServerConfiguration(
                secureCookies: true, secret: secret,  // 32 bytes or more, from your vault
                signedInAccount: { request in await signedInUser(request) }))  // optional: your own sign-in
        let router = Router(context: WebAuthnRequestContext.self)  // knows the client address, for throttling
        router.addRoutes(webauthn.routes(), atPath: "/webauthn")  // POST /webauthn/attestation/options, ...
        router.get("/hello") { _, _ in "your own routes" }
        // --- end ---

        try await Self.serving({ running in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { await running($0.localAddress?.port ?? 0) })
        }) { port in
            let options = try await Self.fetch(port, "/webauthn/attestation/options", post: #"{"username":"alice","displayName":"Alice"}"#)
            #expect(options.status == 200, "\(options.body)")
            #expect(options.body.contains("\"challenge\""))
            #expect(options.headers["set-cookie"]?.hasPrefix("__Host-") == true)
            #expect(options.headers["content-security-policy"] != nil)
            // Nothing at the root, no demo unless asked for, and the host's route untouched by our headers.
            #expect(try await Self.fetch(port, "/attestation/options", post: "{}").status == 404)
            #expect(try await Self.fetch(port, "/").status == 404)
            let hello = try await Self.fetch(port, "/hello")
            #expect(hello.body == "your own routes")
            #expect(hello.headers["content-security-policy"] == nil)
        }
        try await store.close()
    }

    @Test("embedded under a prefix: the well-known files at the root; a host route's requireRecentVerification answers 401, not 500")
    func embeddedUnderPrefix() async throws {
        let rp = try RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
        let engine = WebAuthnEngine(relyingParty: rp)
        let webauthn = try WebAuthnRoutes(
            engine: engine, accounts: InMemoryAccountStore(),
            configuration: ServerConfiguration(relatedOrigins: ["https://example.org"], secret: Array(repeating: 7, count: 32)))
        let router = Router(context: WebAuthnRequestContext.self)
        webauthn.add(to: router, atPath: "/webauthn")
        router.get("/me") { request, _ in Base64URL.encode(try await webauthn.requireRecentVerification(request)) }
        try await Self.serving({ running in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { await running($0.localAddress?.port ?? 0) })
        }) { port in
            // Browsers look for the well-known files at the root only (they were under the prefix only).
            let wellKnown = try await Self.fetch(port, "/.well-known/webauthn")
            #expect(wellKnown.status == 200 && wellKnown.body.contains("https://example.org"), "\(wellKnown)")
            // Without a session: the status and envelope the ceremony routes use (it was 500, empty).
            let me = try await Self.fetch(port, "/me")
            #expect(me.status == 401 && me.body.contains("sign_in_required"), "\(me)")
        }
    }

    @Test("the account API mounted where the host likes (accountRoutes), and signedInAccount in a host route, before and after a passkey sign-in")
    func accountAPIForHosts() async throws {
        // Adopter review: the account API existed only as the demo's /demo/..., and a host route
        // had no way to ask who was signed in short of requiring a recent verification.
        let rp = try RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
        let credentials = InMemoryCredentialStore()
        let accounts = InMemoryAccountStore(credentials: credentials)
        let engine = WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: InMemoryChallengeStore(clock: rp.clock), accounts: accounts)
        // The host's own sign-in: the account named by a header (a stand-in for the host's session).
        let hostSignIn: @Sendable (Request) async -> [UInt8]? = { request in
            request.headers[values: .init("X-Host-Account")!].first.flatMap(Base64URL.decode)
        }
        var configuration = ServerConfiguration(secret: Array(repeating: 9, count: 32), signedInAccount: hostSignIn)
        configuration.sessionCookieName = "shop_passkey"  // the host's own cookies keep their names
        let webauthn = try WebAuthnRoutes(engine: engine, accounts: accounts, configuration: configuration)
        let router = Router(context: WebAuthnRequestContext.self)
        router.addRoutes(webauthn.routes(), atPath: "/webauthn")
        router.addRoutes(webauthn.accountRoutes(), atPath: "/me")
        router.get("/orders") { request, _ -> String in
            guard let account = try await webauthn.signedInAccount(request) else { return "nobody" }
            return "orders of \(Base64URL.encode(account))"
        }
        try await Self.serving({ running in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { await running($0.localAddress?.port ?? 0) })
        }) { port in
            let browser = AppleFlowTests.Client(port: port)
            #expect(try await browser.send("/orders", method: "GET").body == .string("nobody"))
            #expect(try await browser.send("/me/session", method: "GET").body["user"] == .null)
            #expect(try await browser.send("/me/credentials", method: "GET").status == 401)
            #expect(try await browser.send("/demo/session", method: "GET").status == 404, "no demo unless mounted")
            let options = try await browser.send("/webauthn/attestation/options", json: #"{"username":"hana","displayName":"Hana"}"#)
            #expect(options.status == 200, "\(options.body)")
            let challenge = try #require(options.body["challenge"]?.stringValue.flatMap(Base64URL.decode))
            let handle = try #require(options.body["user"]?["id"]?.stringValue.flatMap(Base64URL.decode))
            let key = SoftwareAuthenticator(profile: .platformPasskey)
            let parts = try key.register(rpId: "example.com", origin: "https://example.com", challenge: challenge, userHandle: handle)
            #expect(try await browser.send("/webauthn/attestation/result", json: parts.json.serialized()).status == 200)
            #expect(browser.cookies.keys.contains("shop_passkey") && !browser.cookies.keys.contains("webauthn_session"), "\(browser.cookies.keys)")
            #expect(try await browser.send("/orders", method: "GET").body == .string("orders of \(Base64URL.encode(handle))"))
            #expect(try await browser.send("/me/session", method: "GET").body["user"]?.stringValue == "hana")
            let listed = try await browser.send("/me/credentials", method: "GET")
            #expect(listed.body["credentials"]?.arrayValue?.count == 1, "\(listed.body)")
            #expect(try await browser.send("/me/account", method: "PATCH", json: #"{"displayName":"Hana K."}"#).body["displayName"]?.stringValue == "Hana K.")
            // The host says another account is signed in while the browser still holds Hana's recent
            // passkey session: one request acts on one account, so Hana's is not deleted (red team).
            let other = Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
            #expect(try await browser.send("/me/session", method: "GET", headers: ["X-Host-Account": other]).body["user"] == .null)
            let mixed = try await browser.send("/me/account", method: "DELETE", headers: ["X-Host-Account": other])
            #expect(mixed.status == 401 && mixed.body["errorMessage"]?.stringValue?.hasPrefix("reauthentication_required") == true, "\(mixed.body)")
            let credentialID = try #require(listed.body["credentials"]?.arrayValue?.first?["id"]?.stringValue)
            let mixedCredential = try await browser.send("/me/credentials/\(credentialID)", method: "DELETE", headers: ["X-Host-Account": other])
            #expect(mixedCredential.status == 401, "\(mixedCredential.body)")
            #expect(try await accounts.account(handle: handle) != nil)
            #expect(try await browser.send("/me/logout", json: "{}").status == 200)
            #expect(try await browser.send("/orders", method: "GET").body == .string("nobody"))
        }
    }

    @Test(
        "a short server secret, a cookie name that is not a plain token, a session lifetime out of range, or durable accounts without a session store are refused when the routes are made"
    )
    func configurationRefused() async throws {
        // They stopped the process (a precondition); an adopter's review: a secret read short from
        // a vault should be a typed error, and sessions kept in memory beside durable accounts
        // signed everyone out at every restart, silently.
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"])
        func refusal(_ configuration: ServerConfiguration, accounts: any AccountStore = InMemoryAccountStore()) -> String? {
            do {
                _ = try WebAuthnRoutes(engine: WebAuthnEngine(relyingParty: rp), accounts: accounts, configuration: configuration)
                return nil
            } catch {
                return error.code == .configurationInvalid ? error.message : "\(error.code)"
            }
        }
        #expect(refusal(ServerConfiguration(secret: [1, 2, 3]))?.contains("secret") == true)
        for name in ["__Host-x", "a;b=c", ""] {
            var configuration = ServerConfiguration(secret: Array(repeating: 1, count: 32))
            configuration.sessionCookieName = name
            #expect(refusal(configuration)?.contains("sessionCookieName") == true, "\(name)")
        }
        // A lifetime set after the initialiser skips its floor; one that is not finite trapped at the first cookie.
        for lifetime in [TimeInterval.infinity, .nan, 59, 401 * 86_400, -1] {
            var configuration = ServerConfiguration(secret: Array(repeating: 1, count: 32))
            configuration.sessionLifetime = lifetime
            #expect(refusal(configuration)?.contains("sessionLifetime") == true, "\(lifetime)")
        }
        let good = ServerConfiguration(secret: Array(repeating: 1, count: 32))
        #expect(refusal(good) == nil, "in-memory accounts keep their sessions in memory")
        #expect(refusal(good, accounts: AccountsOnly())?.contains("sessions") == true)
        let store = try await SQLiteStore.open(path: ":memory:")
        defer { Task { try? await store.close() } }
        #expect(refusal(good, accounts: store) == nil, "a store that keeps sessions keeps them")
    }

    /// An account store that keeps no sessions (a host's own).
    struct AccountsOnly: AccountStore {
        let inner = InMemoryAccountStore()
        func account(named name: String) async throws -> UserEntity? { try await inner.account(named: name) }
        func account(handle: [UInt8]) async throws -> UserEntity? { try await inner.account(handle: handle) }
        func create(_ user: UserEntity, firstCredential: CredentialRecord) async throws { try await inner.create(user, firstCredential: firstCredential) }
        func deleteAccount(handle: [UInt8]) async throws -> Bool { try await inner.deleteAccount(handle: handle) }
        func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool { try await inner.setDisplayName(displayName, handle: handle) }
    }

    @Test("enrollment closed to strangers (signedInOwnerOnly): a taken name and a free one get the same refusal")
    func closedEnrollmentSaysNothing() async throws {
        let rp = try RelyingParty(id: "localhost", name: "Test", origins: ["http://localhost"])
        let engine = WebAuthnEngine(relyingParty: rp)
        let accounts = InMemoryAccountStore()
        let alice = UserEntity.new(name: "alice")
        try await accounts.create(alice, firstCredential: try StoreContractTests.record(user: alice.id))
        try await Self.serving({ running in
            try buildApplication(
                engine: engine, accounts: accounts, sessions: InMemorySessionStore(),
                configuration: ApplicationConfiguration(
                    port: 0, routes: ServerConfiguration(mayEnroll: EnrollmentRequest.signedInOwnerOnly), onServerRunning: running))
        }) { port in
            var answers: [String: (Int, String)] = [:]
            for name in ["alice", "ALICE", "nobody"] {
                let refused = try await Self.fetch(port, "/attestation/options", post: #"{"username":"\#(name)"}"#)
                answers[name] = (refused.status, refused.body)
            }
            #expect(answers["alice"]?.0 == 409, "\(answers)")
            #expect(Set(answers.values.map { "\($0.0) \($0.1)" }).count == 1, "\(answers)")
        }
    }

    @Test("buildApplication serves the ceremony routes, the demo only when asked, and security headers on 404s")
    func builtApplication() async throws {
        let rp = try RelyingParty(id: "localhost", name: "Test", origins: ["http://localhost"])
        let engine = WebAuthnEngine(relyingParty: rp)
        for demo in [false, true] {
            try await Self.serving({ running in
                try buildApplication(
                    engine: engine, accounts: InMemoryAccountStore(), sessions: InMemorySessionStore(),
                    configuration: ApplicationConfiguration(
                        port: 0, routes: ServerConfiguration(demo: demo), onServerRunning: running))
            }) { port in
                let options = try await Self.fetch(port, "/assertion/options", post: "{}")
                #expect(options.status == 200, "\(options.body)")
                let page = try await Self.fetch(port, "/")
                #expect(page.status == (demo ? 200 : 404))
                #expect(page.headers["x-content-type-options"] == "nosniff")
                #expect(try await Self.fetch(port, "/demo/session").status == (demo ? 200 : 404))
            }
        }
    }
}
