import Foundation
import Hummingbird
import NIOCore
import Testing
@testable import WebAuthnCore
@testable import WebAuthnServer
import WebAuthnMetadata
import WebAuthnConformance
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

@Suite("Browser sessions, throttling and client addresses")
struct SessionTests {
    let sessions = BrowserSessions(store: InMemorySessionStore(), secret: SecureRandom.bytes(32), secure: false, lifetime: 3600)

    func request(cookie: String?, headers: [String: String] = [:]) -> Request {
        var fields = HTTPFields()
        if let cookie { fields[.cookie] = cookie }
        for (name, value) in headers { fields[.init(name)!] = value }
        return Request(head: .init(method: .post, scheme: "http", authority: "localhost", path: "/", headerFields: fields), body: .init(buffer: ByteBuffer()))
    }

    @Test("sign-ins sweep expired sessions from the store, at most once a minute")
    func signInSweeps() async throws {
        let store = InMemorySessionStore()
        let sessions = BrowserSessions(store: store, secret: SecureRandom.bytes(32), secure: false, lifetime: 3600)
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let stale = SignedInSession(idHash: SecureRandom.bytes(32), userHandle: [1], createdAt: t0, authenticatedAt: t0, expiresAt: t0.addingTimeInterval(10))
        try await store.insert(stale)
        _ = try await sessions.signIn([2], replacing: nil, now: t0.addingTimeInterval(5), verified: false)
        #expect(try await store.session(idHash: stale.idHash) != nil)  // not expired yet
        _ = try await sessions.signIn([3], replacing: nil, now: t0.addingTimeInterval(30), verified: false)
        #expect(try await store.session(idHash: stale.idHash) != nil)  // expired, but swept less than a minute ago
        _ = try await sessions.signIn([4], replacing: nil, now: t0.addingTimeInterval(70), verified: false)
        #expect(try await store.session(idHash: stale.idHash) == nil)
    }

    @Test("Content-Type: application/json in any case, with parameters and spaces; nothing else")
    func jsonContentType() {
        for yes in ["application/json", "Application/JSON; charset=utf-8", " application/json ", "application/json\t;x=y", "APPLICATION/JSON;"] {
            #expect(HTTP.isJSON(yes), "\(yes)")
        }
        for no in ["", "application/jsonx", "text/json", "application/json-seq", "application/ json", "application/jsoN\u{0130}", "multipart/form-data"] {
            #expect(!HTTP.isJSON(no), "\(no)")
        }
    }

    @Test("a cookie is a session only if this server's secret signed it")
    func signedCookies() {
        let token = sessions.mint()
        #expect(sessions.token(request(cookie: "webauthn_session=\(token.cookieValue)")) == token)
        var forged = token.bytes
        forged[31] ^= 1
        #expect(sessions.token(request(cookie: "webauthn_session=\(Base64URL.encode(forged))")) == nil)
        let other = BrowserSessions(store: InMemorySessionStore(), secret: SecureRandom.bytes(32), secure: false, lifetime: 3600)
        #expect(other.token(request(cookie: "webauthn_session=\(token.cookieValue)")) == nil)
        #expect(sessions.token(request(cookie: "webauthn_session=forged")) == nil)
        // The same token spelled with the last character's two unused bits set: refused.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let last = alphabet.firstIndex(of: token.cookieValue.last!)!
        for bits in 1...3 {
            let respelled = String(token.cookieValue.dropLast()) + String(alphabet[last | bits])
            #expect(Base64URL.decode(respelled) == token.bytes, "the spelling decodes to the token, or the check is vacuous")
            #expect(sessions.token(request(cookie: "webauthn_session=\(respelled)")) == nil, "\(respelled)")
        }
        #expect(sessions.token(request(cookie: nil)) == nil)
        let secure = BrowserSessions(store: InMemorySessionStore(), secret: [1], secure: true, lifetime: 60)
        let minted = secure.mint()
        #expect(secure.cookie(minted).value == "__Host-webauthn_session=\(minted.cookieValue); Max-Age=60; Path=/; Secure; HttpOnly; SameSite=Strict")
        #expect(secure.expiredCookie.value == "__Host-webauthn_session=; Max-Age=0; Path=/; Secure; HttpOnly; SameSite=Strict")
        #expect(sessions.cookie(token).value == "webauthn_session=\(token.cookieValue); Max-Age=3600; Path=/; HttpOnly; SameSite=Strict")
    }

    @Test("the session cookie is read as Hummingbird reads cookies: the first of its name, among others, in any Cookie field")
    func cookieLookup() {
        let token = sessions.mint()
        let value = token.cookieValue
        for header in [
            "webauthn_session=\(value)", "a=1; webauthn_session=\(value)", "a=1;webauthn_session=\(value); b=2", " \twebauthn_session=\(value)",
            "x_webauthn_session=no; webauthn_session=\(value)", "webauthn_sessionx=no; webauthn_session=\(value)", "; ;webauthn_session=\(value);",
            "webauthn_session=\(value); webauthn_session=\(Base64URL.encode(SecureRandom.bytes(32)))",
        ] {
            #expect(HTTP.cookie("webauthn_session", in: request(cookie: header)) == Substring(value), "\(header)")
            #expect(Cookies(from: [header])["webauthn_session"]?.value == value, "\(header)")
            #expect(sessions.token(request(cookie: header)) == token, "\(header)")
        }
        for header in ["", "webauthn_session", "webauthn_sessio=\(value)", "Webauthn_session=\(value)", "a=webauthn_session=\(value)"] {
            #expect(HTTP.cookie("webauthn_session", in: request(cookie: header)) == nil, "\(header)")
            #expect(Cookies(from: [header])["webauthn_session"] == nil, "\(header)")
        }
        #expect(HTTP.cookie("webauthn_session", in: request(cookie: "webauthn_session=")) == "")
        // The worst a header can hold (SwiftNIO stops headers at 80 KiB): one pass, the same answer.
        let many = (0..<5000).map { "c\($0)=\(String(repeating: "x", count: 8))" }.joined(separator: "; ")
        #expect(sessions.token(request(cookie: many + "; webauthn_session=\(value)")) == token)
        #expect(sessions.token(request(cookie: String(repeating: ";", count: 80_000))) == nil)
        #expect(sessions.token(request(cookie: "webauthn_session=" + String(repeating: "A", count: 80_000))) == nil)
        var fields = HTTPFields()
        fields[values: .cookie] = ["a=1", "webauthn_session=\(value)"]
        let split = Request(
            head: .init(method: .post, scheme: "http", authority: "localhost", path: "/", headerFields: fields), body: .init(buffer: ByteBuffer()))
        #expect(sessions.token(split) == token)
    }

    @Test("signing in always issues a new session, ends the old one, and signing out ends it on the server")
    func rotation() async throws {
        let now = Date()
        let anonymous = sessions.mint()
        let first = try await sessions.signIn([1, 2, 3], replacing: anonymous, now: now, verified: true)
        #expect(first != anonymous)
        #expect(try await sessions.signedIn(first, now: now)?.userHandle == [1, 2, 3])
        let second = try await sessions.signIn([1, 2, 3], replacing: first, now: now, verified: true)
        #expect(second != first)
        #expect(try await sessions.signedIn(first, now: now) == nil)
        #expect(try await sessions.signedIn(second, now: now.addingTimeInterval(3601)) == nil)  // expired
        try await sessions.signOut(second)
        #expect(try await sessions.signedIn(second, now: now) == nil)
    }

    @Test("the in-memory session store is bounded and evicts the oldest in O(1)")
    func boundedSessions() async throws {
        let store = InMemorySessionStore(capacity: 50)
        var first: [UInt8] = []
        for i in 0..<500 {
            let s = SignedInSession(
                idHash: SecureRandom.bytes(32), userHandle: SecureRandom.bytes(8), createdAt: Date(), authenticatedAt: Date(),
                expiresAt: Date().addingTimeInterval(60))
            if i == 0 { first = s.idHash }
            try await store.insert(s)
        }
        #expect(store.count == 50)
        #expect(try await store.session(idHash: first) == nil)
    }

    @Test("token buckets: a burst of ten seconds' worth, then 429 with a wait; refilled by time; bounded")
    func buckets() {
        let limiter = RateLimiter(maxTracked: 100)
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        var allowed = 0
        for _ in 0..<100 where limiter.take("a", rate: 3, now: t0) == nil { allowed += 1 }
        #expect(allowed == 30)
        #expect(limiter.take("a", rate: 3, now: t0) == 1)
        #expect(limiter.take("a", rate: 3, now: t0.addingTimeInterval(1)) == nil)
        #expect(limiter.take("b", rate: 3, now: t0) == nil)  // another key has its own bucket
        for i in 0..<1000 { _ = limiter.take("k\(i)", rate: 1, now: t0) }
        #expect(limiter.count <= 100)
    }

    @Test("a flood of new keys does not push out a throttled bucket while idle ones can go")
    func bucketsKeepThrottled() {
        let limiter = RateLimiter(maxTracked: 100)
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        while limiter.take("attacker", rate: 1, now: t0) == nil {}
        // A stranger with many addresses: 1,000 new keys in half a second, one request each (each
        // of their buckets has refilled 33 ms after its one request).
        for i in 0..<1000 { _ = limiter.take("k\(i)", rate: 30, now: t0.addingTimeInterval(Double(i) / 2000)) }
        #expect(limiter.count <= 100)
        // Before: the oldest-inserted bucket was dropped first, and the throttled one came back full.
        #expect(limiter.take("attacker", rate: 1, now: t0.addingTimeInterval(0.5)) != nil)
        // Buckets that have not refilled are dropped oldest first when nothing else can go.
        for i in 0..<1000 { _ = limiter.take("n\(i)", rate: 1, now: t0.addingTimeInterval(0.5)) }
        #expect(limiter.count <= 100)
        var left = 0  // the newest is kept, with the 9 tokens its one request left
        while limiter.take("n999", rate: 1, now: t0.addingTimeInterval(0.5)) == nil { left += 1 }
        #expect(left == 9)
    }

    @Test("client address: the socket peer, or X-Forwarded-For only behind a trusted proxy")
    func clientAddress() throws {
        let peer = try SocketAddress(ipAddress: "10.1.2.3", port: 5000)
        let forwarded = request(cookie: nil, headers: ["X-Forwarded-For": "203.0.113.9, 10.1.2.4"])
        #expect(ClientAddress.of(forwarded, peer: peer, trustedProxies: []) == "10.1.2.3")
        let proxies = [try #require(CIDR("10.0.0.0/8"))]
        #expect(ClientAddress.of(forwarded, peer: peer, trustedProxies: proxies) == "203.0.113.9")
        let outsider = try SocketAddress(ipAddress: "198.51.100.7", port: 5000)
        #expect(ClientAddress.of(forwarded, peer: outsider, trustedProxies: proxies) == "198.51.100.7")
        #expect(ClientAddress.of(request(cookie: nil, headers: ["X-Forwarded-For": "garbage"]), peer: peer, trustedProxies: proxies) == "10.1.2.3")
        // Entries with a port, as some load balancers write them (red team, thirteenth pass: every
        // client behind such a proxy shared its throttle); anything else stays garbage.
        for (entry, client) in [
            ("203.0.113.9:41234", "203.0.113.9"), ("[2001:db8::1]:443", "2001:db8::1"), ("[2001:db8::1]", "2001:db8::1"),
            ("203.0.113.9:", "10.1.2.3"), ("203.0.113.9:123456", "10.1.2.3"), ("203.0.113.9:80:80", "10.1.2.3"), ("[203.0.113.9]:80", "10.1.2.3"),
            ("2001:db8::1:80", "2001:db8::1:80"), ("[2001:db8::1]x", "10.1.2.3"), ("[2001:db8::1]:-1", "10.1.2.3"), ("host.example:80", "10.1.2.3"),
            ("10.9.9.9:80, 203.0.113.7:1", "203.0.113.7"), ("203.0.113.7:1, 10.9.9.9:80", "203.0.113.7"),
        ] {
            let seen = ClientAddress.of(request(cookie: nil, headers: ["X-Forwarded-For": entry]), peer: peer, trustedProxies: proxies)
            #expect(seen == client, "\(entry)")
        }
        #expect(CIDR("::1/128")?.contains("::1") == true && CIDR("::1/128")?.contains("::2") == false)
        #expect(CIDR("10.0.0.0/8")?.contains("::ffff:10.9.9.9") == true)
        #expect(CIDR("10.0.0.0/33") == nil && CIDR("nonsense") == nil)
        // Red team, fortieth pass: a mapped range never matched an IPv4 peer, and a /64 was
        // written one group a byte (`20:1:d:b8:ab:cd:12:34::/64`) in the throttled event.
        #expect(CIDR("::ffff:127.0.0.1/128")?.contains("127.0.0.1") == true && CIDR("::ffff:127.0.0.1")?.contains("::ffff:127.0.0.1") == true)
        #expect(CIDR("::ffff:127.0.0.0/120")?.contains("127.0.0.9") == true && CIDR("::ffff:127.0.0.0/120")?.contains("127.0.1.9") == false)
        #expect(CIDR("::ffff:0:0/95")?.contains("127.0.0.1") == false)
        #expect(CIDR("::/00")?.holdsEveryAddress == true && CIDR("::ffff:0:0/96")?.holdsEveryAddress == true && CIDR("0.0.0.0/0")?.holdsEveryAddress == true)
        #expect(CIDR("10.0.0.0/8")?.holdsEveryAddress == false && CIDR("::ffff:0:0/97")?.holdsEveryAddress == false)
        #expect(ClientAddress.bucket("2001:db8:abcd:1234:5::1") == "2001:db8:abcd:1234::/64")
        #expect(ClientAddress.bucket("2001:db8::1") == "2001:db8:0:0::/64" && ClientAddress.bucket("::1") == "0:0:0:0::/64")
        #expect(ClientAddress.bucket("::ffff:10.1.2.3") == "10.1.2.3" && ClientAddress.bucket("10.1.2.3") == "10.1.2.3")
    }

    @Test("--rate-limit values")
    func rateLimitParsing() {
        #expect(RateLimit.parse("off") == .some(nil))
        #expect(RateLimit.parse("5") == .some(RateLimit(perAddress: 5)))
        #expect(RateLimit.parse("5:50") == .some(RateLimit(perAddress: 5, perSession: 50)))
        #expect(RateLimit.parse("0") == nil && RateLimit.parse("x") == nil && RateLimit.parse("1:2:3") == nil && RateLimit.parse("inf") == nil)
    }

    @Test("connection counts: per address, IPv6 by its /64, trusted proxies not counted, a close makes room")
    func connectionCounts() {
        let counts = ConnectionCounts(limit: 2, exempt: [CIDR("10.0.0.0/8")!])
        #expect(counts.open("192.0.2.1") == .counted("192.0.2.1"))
        #expect(counts.open("192.0.2.1") == .counted("192.0.2.1"))
        #expect(counts.open("192.0.2.1") == .refused)
        #expect(counts.open("192.0.2.2") == .counted("192.0.2.2"), "another address has its own count")
        // An IPv4-mapped address is the IPv4 address; IPv6 addresses of one /64 share a count.
        #expect(counts.open("::ffff:192.0.2.2") == .counted("192.0.2.2"))
        #expect(counts.open("192.0.2.2") == .refused)
        #expect(counts.open("2001:db8:1:2::1") != .refused && counts.open("2001:db8:1:2:ffff::9") != .refused)
        #expect(counts.open("2001:db8:1:2::77") == .refused)
        #expect(counts.open("2001:db8:1:3::1") != .refused, "the next /64 is another subscriber")
        // A trusted proxy carries many clients: never counted, never refused.
        for _ in 0..<10 { #expect(counts.open("10.1.2.3") == .exempt) }
        // A close makes room for exactly one.
        counts.close("192.0.2.1")
        #expect(counts.open(from: "192.0.2.1") == 1)
        #expect(counts.open("192.0.2.1") == .counted("192.0.2.1"))
        #expect(counts.open("192.0.2.1") == .refused)
        counts.close("192.0.2.1")
        counts.close("192.0.2.1")
        #expect(counts.open(from: "192.0.2.1") == 0, "a key with no connection left is dropped")
    }

    @Test("Content-Length as the connection handler and the body reader judge it: digits only, an overflow over every limit")
    func declaredLength() {
        func length(_ value: String?) -> Int? {
            var fields = HTTPFields()
            if let value { fields[.contentLength] = value }
            return HTTP.declaredLength(fields)
        }
        #expect(length("0") == 0 && length("65536") == 65_536)
        #expect(length(nil) == nil && length("") == nil)
        for malformed in ["+5", "-1", "1 2", "0x10", "1e3", "５"] { #expect(length(malformed) == nil, "\(malformed)") }
        // Past Int (and past UInt64): larger than any limit, never a trap or a wrap.
        #expect(length("9223372036854775808") == .max)
        #expect(length(String(repeating: "9", count: 4096)) == .max)
    }

    @Test("stores that cannot guard the last way in: deletions of one account's credentials run one at a time; 16 at once of the last two leave one")
    func lastTwoInProcess() async throws {
        let credentials = InMemoryCredentialStore()
        let accounts = InMemoryAccountStore(credentials: credentials)
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"])
        let engine = WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: InMemoryChallengeStore(), accounts: accounts)
        let routes = try WebAuthnRoutes(
            engine: engine, accounts: accounts, sessions: InMemorySessionStore(), configuration: ServerConfiguration(secret: SecureRandom.bytes(32)))
        for round in 0..<20 {  // twenty accounts: without the serializer, a few rounds in each run lose both
            let user = UserEntity.new(name: "vic\(round)")
            var ids: [[UInt8]] = []
            for newAccount in [true, false] {
                let options = try await engine.startRegistration(user: user, newAccount: newAccount)
                let parts = try SoftwareAuthenticator().register(
                    rpId: "example.com", origin: "https://example.com", challenge: options.challenge, userHandle: user.id)
                ids.append(try await engine.finishRegistration(json: parts.jsonBytes).credential.id)
            }
            let outcomes = await withTaskGroup(of: String.self) { group in
                for id in Array(repeating: ids, count: 8).joined() {
                    group.addTask {
                        do {
                            try await routes.deleteCredential(id, of: user.id)
                            return "deleted"
                        } catch { return (error as? WebAuthnError)?.code.rawValue ?? "\(error)" }
                    }
                }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == "deleted" }.count == 1, "\(outcomes)")
            #expect(outcomes.allSatisfy { ["deleted", "last_credential", "credential_unknown"].contains($0) }, "\(outcomes)")
            #expect(try await credentials.credentials(forUser: user.id).count == 1)
        }
    }
}
