import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnSQLite
import WebAuthnPostgres
import WebAuthnTesting
import WebAuthnMetadata
import WebAuthnConformance
import _WebAuthnEncoding
import _WebAuthnCrypto

/// `webauthn serve` over real HTTP on loopback: the FIDO2 conformance API,
/// the demo API, the well-known files, limits, and atomicity across processes.
@Suite("Server over HTTP", .serialized)
struct ServerTests {
    let rpId = ServeProcess.rpId
    let origin = ServeProcess.origin

    /// Registers `username` with a software authenticator; returns the credential id and the session cookie.
    func register(
        _ server: ServeProcess, _ authenticator: SoftwareAuthenticator, username: String,
        attestation: SoftwareAuthenticator.Attestation = .packedSelf, cookie: String? = nil
    ) async throws -> ([UInt8], String?) {
        let options = try await server.request(
            "/attestation/options", ["username": .string(username), "displayName": "Alice", "attestation": "direct"],
            cookie: cookie)
        #expect(options.ok, "\(options.errorMessage)")
        let challenge = Base64URL.decode(options.json["challenge"]!.stringValue!)!
        let user = Base64URL.decode(options.json["user"]!["id"]!.stringValue!)!
        let parts = try authenticator.register(rpId: rpId, origin: origin, challenge: challenge, userHandle: user, attestation: attestation)
        var body = parts.json.objectValue!
        body["rawId"] = nil  // the conformance shape
        body["getClientExtensionResults"] = body["clientExtensionResults"]
        body["clientExtensionResults"] = nil
        let result = try await server.request("/attestation/result", .object(body), cookie: options.cookie)
        #expect(result.ok, "\(result.errorMessage)")
        return (parts.id, result.cookie ?? options.cookie)
    }

    @Test("the FIDO2 conformance API: register, sign in by name and without, replay refused")
    func conformanceFlow() async throws {
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase())
        defer { server.stop() }
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        // Options carry rp.id, timeout, ES256/EdDSA/RS256, and echo what was asked.
        let options = try await server.request(
            "/attestation/options",
            [
                "username": "alice", "displayName": "Alice", "attestation": "direct",
                "authenticatorSelection": ["requireResidentKey": false, "authenticatorAttachment": "cross-platform", "userVerification": "preferred"],
                "extensions": ["credProps": true],
            ])
        #expect(options.ok && options.status == 200)
        #expect(options.json["rp"]?["id"]?.stringValue == rpId)
        #expect(options.json["timeout"]?.intValue ?? 0 > 0)
        let algs = Set(options.json["pubKeyCredParams"]?.arrayValue?.compactMap { $0["alg"]?.intValue } ?? [])
        #expect(algs.isSuperset(of: [-7, -8, -257]))
        #expect(options.json["attestation"]?.stringValue == "direct")
        #expect(options.json["authenticatorSelection"]?["authenticatorAttachment"]?.stringValue == "cross-platform")
        #expect(
            options.json["authenticatorSelection"] == [
                "requireResidentKey": false, "authenticatorAttachment": "cross-platform", "userVerification": "preferred",
            ])
        // Unknown members and values are ignored, as L3 §5.4.4 says, and not echoed.
        let odd = try await server.request(
            "/attestation/options",
            [
                "username": "odd",
                "authenticatorSelection": ["residentKey": "sometimes", "userVerification": "maybe", "authenticatorAttachment": "pocket", "x": 1],
            ])
        #expect(odd.ok && odd.json["authenticatorSelection"] == [:])
        #expect(options.json["extensions"]?["credProps"]?.boolValue == true)
        // Served for https origins: the cookie carries the __Host- prefix (Secure, no Domain, Path=/).
        #expect(options.cookie?.hasPrefix("__Host-webauthn_session=") == true)

        let (id, cookie) = try await register(server, authenticator, username: "alice")
        // The user's credentials appear in excludeCredentials (for the signed-in owner) and allowCredentials.
        let again = try await server.request("/attestation/options", ["username": "alice"], cookie: cookie)
        #expect(again.json["excludeCredentials"]?.arrayValue?.first?["id"]?.stringValue == Base64URL.encode(id))
        let request = try await server.request("/assertion/options", ["username": "alice", "userVerification": "discouraged"], cookie: cookie)
        #expect(request.ok && request.json["rpId"]?.stringValue == rpId)
        #expect(request.json["allowCredentials"]?.arrayValue?.first?["id"]?.stringValue == Base64URL.encode(id))
        #expect(request.json["userVerification"]?.stringValue == "discouraged")
        let assertion = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(request.json["challenge"]!.stringValue!)!, credentialId: id)
        let signedIn = try await server.request("/assertion/result", assertion.json, cookie: request.cookie)
        #expect(signedIn.ok, "\(signedIn.errorMessage)")
        let replay = try await server.request("/assertion/result", assertion.json, cookie: request.cookie)
        #expect(!replay.ok && replay.status >= 400 && replay.status < 500)
        #expect(replay.errorMessage.hasPrefix("challenge_"))

        // Discoverable login: no username, the userHandle finds the owner.
        let discoverable = try await server.request("/assertion/options", [:])
        #expect(discoverable.ok && (discoverable.json["allowCredentials"]?.arrayValue ?? []).isEmpty)
        let d = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(discoverable.json["challenge"]!.stringValue!)!, credentialId: id)
        let signedInAgain = try await server.request("/assertion/result", d.json, cookie: discoverable.cookie)
        #expect(signedInAgain.ok)

        // The demo API sees the signed-in user (under the new session) and their credential.
        let session = try await server.request("/demo/session", cookie: signedInAgain.cookie)
        #expect(session.json["user"]?.stringValue == "alice")
        let list = try await server.request("/demo/credentials", cookie: signedInAgain.cookie)
        #expect(list.json["credentials"]?.arrayValue?.first?["signCount"]?.intValue == 2)
    }

    @Test("failures: bad bodies, tampering, each a 4xx with status failed and a non-empty message")
    func failures() async throws {
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase())
        defer { server.stop() }
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let (id, _) = try await register(server, authenticator, username: "bob")
        var replies: [ServeProcess.Reply] = []
        replies.append(try await server.request("/attestation/options", [:]))
        replies.append(try await server.request("/attestation/options", ["username": "x", "attestation": "bogus"]))
        replies.append(try await server.request("/attestation/result", raw: Array("{not json".utf8)))
        replies.append(try await server.request("/attestation/result", raw: Array(String(repeating: "[", count: 5000).utf8)))
        replies.append(try await server.request("/attestation/result", raw: [UInt8](repeating: 0x20, count: 200_000)))
        let request = try await server.request("/assertion/options", ["username": "bob"])
        var tampered = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(request.json["challenge"]!.stringValue!)!, credentialId: id)
        tampered.signature[10] ^= 1
        replies.append(try await server.request("/assertion/result", tampered.json, cookie: request.cookie))
        for reply in replies {
            #expect(!reply.ok && (400..<500).contains(reply.status), "\(reply.status) \(reply.json.serialized())")
            #expect(reply.json["status"]?.stringValue == "failed" && !reply.errorMessage.isEmpty)
        }
        // A bad signature is one generic answer (the log has signature_invalid).
        #expect(replies.last?.errorMessage.hasPrefix("authentication_failed") == true)
        #expect(replies[4].status == 413)
        // A request's own members are the request's (no user name, an unknown attestation
        // preference); a credential without its response is the credential's.
        #expect(replies[0].errorMessage.hasPrefix("request_malformed:") && replies[1].errorMessage.hasPrefix("request_malformed:"))
        let partial = try await server.request("/attestation/result", ["type": "public-key", "id": "AA"])
        #expect(partial.status == 400 && partial.errorMessage.hasPrefix("response_malformed:"), "\(partial.errorMessage)")
    }

    @Test("log lines carry the request's metadata, formatted when written (StreamLogHandler's format)")
    func requestLogLines() async throws {
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase(), logLevel: "info")
        defer { server.stop() }
        _ = try await server.request("/assertion/options", [:])
        _ = try await server.request("/nowhere")
        // A stranger's query and length stay out of the log (red-team findings: a token in a
        // query was logged word for word; an 80 KB path made an 80 KB line).
        _ = try await server.request("/healthz?token=QUERYSECRET789")
        _ = try await server.request("/" + String(repeating: "a", count: 4000))
        // The audit event names a passkey or an Apple ID by its hash; the request line did by the
        // identifier itself (red team, round 26).
        _ = try await server.request("/demo/credentials/CREDENTIALID456", method: "DELETE")
        _ = try await server.request("/demo/identities/APPLESUBJECT123/x", method: "DELETE")
        // Other spellings (re-check of round 26: each was written whole).
        for path in ["//demo/credentials/OTHERID1", "/DEMO/CREDENTIALS/OTHERID2", "/%64emo/%63redentials/OTHERID3", "/demo/identities//OTHERID4"] {
            let connection = try RawConnection(port: server.port)
            defer { connection.close() }
            try connection.send("DELETE \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            _ = connection.drain()
        }
        server.stop()  // every line written
        let lines = server.log.split(separator: "\n").filter { $0.contains("[Hummingbird] Request") }
        let post = lines.first { $0.contains("hb.request.path=/assertion/options") }
        #expect(post?.contains(" info webauthn: hb.request.id=") == true, "\(lines)")
        #expect(post?.contains("hb.request.method=POST hb.request.path=/assertion/options [Hummingbird] Request") == true, "\(lines)")
        #expect(lines.contains { $0.contains("hb.request.method=GET hb.request.path=/nowhere") })
        #expect(lines.contains { $0.contains("hb.request.path=/healthz?…") })
        #expect(!server.log.contains("QUERYSECRET789"))
        #expect(lines.contains { $0.contains("hb.request.path=/demo/credentials/:id [") }, "\(lines)")
        #expect(lines.contains { $0.contains("hb.request.path=/demo/identities/:id/x [") }, "\(lines)")
        #expect(!server.log.contains("CREDENTIALID456") && !server.log.contains("APPLESUBJECT123"))
        #expect(!server.log.contains("OTHERID"), "\(lines.filter { $0.contains("OTHERID") })")
        #expect(lines.contains { $0.contains("…(4001 bytes)") } && lines.allSatisfy { $0.utf8.count < 1_000 }, "\(lines.map(\.count))")
    }

    @Test("a stranger's flood cannot write the log as fast as it sends: the request log keeps --log-rate, throttling is audited once per address")
    func logFlood() async throws {
        // Red team: 45,000 cheap requests a second from one address wrote 7 MB of log a second,
        // and every refused request wrote a `throttled` audit line.
        let server = try await ServeProcess(
            database: ServeProcess.temporaryDatabase(), extra: ["--log-rate", "5", "--rate-limit", "1:1"], logLevel: "info")
        defer { server.stop() }
        let started = ContinuousClock.now
        for _ in 0..<150 {  // paced over about two seconds, so that the budget refills several times meanwhile
            _ = try await server.request("/nowhere")
            try await Task.sleep(for: .milliseconds(12))
        }
        var refused = 0
        for _ in 0..<40 where try await server.request("/assertion/options", [:]).status == 429 { refused += 1 }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18 + 1
        try await Task.sleep(for: .milliseconds(1_200))
        _ = try await server.request("/healthz")  // written, after the count of those that were not
        server.stop()
        let log = server.log
        let requestLines = log.split(separator: "\n").filter { $0.contains("[Hummingbird] Request") }
        // The burst (ten seconds' worth: 50), and 5 a second after it.
        #expect(requestLines.count >= 50 && Double(requestLines.count) <= 52 + seconds * 5, "\(requestLines.count) in \(seconds) s")
        let lines = log.split(separator: "\n")
        // Each line written after some were not says how many, so that nothing is lost silently.
        let summaries = lines.indices.filter { lines[$0].contains("log lines below notice not written (over --log-rate)") }
        let dropped = summaries.map { at in
            lines[at].split(separator: " ").first { $0.hasPrefix("log.dropped=") }.flatMap { Int($0.dropFirst("log.dropped=".count)) } ?? 0
        }
        #expect(dropped.reduce(0, +) + requestLines.count == 191, "\(dropped), \(requestLines.count)")
        #expect(summaries.allSatisfy { lines[$0].contains(" warning ") }, "\(log.suffix(2000))")
        // At most one such warning a second (red team: one before every line let through doubled
        // a flood's log at warning level).
        #expect(Double(summaries.count) <= seconds + 1, "\(summaries.count) warnings in \(seconds) s")
        // The health check after the pause is written (with, before it, the count of the flood's
        // last lines not written, if any were not): the sum above holds only with it.
        #expect(lines.contains { $0.contains("hb.request.path=/healthz") })
        // Every refused request is counted in /metrics; one audit line says the address is throttled.
        let throttled = log.split(separator: "\n").filter { $0.contains("event=throttled") }
        #expect(refused >= 25 && (1...2).contains(throttled.count), "\(refused) refused, \(throttled.count) lines")
    }

    @Test("the throttled event names the address throttled, and hints at trustedProxies when X-Forwarded-For came from an untrusted peer")
    func throttledAddressAndProxyHint() async throws {
        // Operator review (helper 72): behind a proxy not listed, every client was one address and
        // one client's refusals refused all, and the throttled event said neither who nor why.
        for trusted in [false, true] {
            let server = try await ServeProcess(
                database: ServeProcess.temporaryDatabase(), extra: ["--rate-limit", "1:1"] + (trusted ? ["--trusted-proxy", "127.0.0.1/32"] : []),
                logLevel: "info")
            defer { server.stop() }
            var refused = 0
            for _ in 0..<25
            where try await server.request(
                "/demo/credentials/X", cookie: "webauthn_session=forged", method: "DELETE", headers: ["X-Forwarded-For": "203.0.113.5"]
            ).status == 429 {
                refused += 1
            }
            #expect(refused > 0)
            #expect(await server.logEventually(contains: "event=throttled"))
            server.stop()
            let event = try #require(server.log.split(separator: "\n").first { $0.contains("event=throttled") })
            #expect(event.contains(trusted ? "address=203.0.113.5" : "address=127.0.0.1"), "\(event)")
            #expect(event.contains("hint=x_forwarded_for_untrusted") == !trusted, "\(event)")
        }
    }

    @Test("a throttled request's audit event writes an account route's identifier as :id, as the request line does")
    func throttledPath() async throws {
        // Red team, round 27: the `throttled` event copied the path whole, so a throttled unlink
        // wrote the Apple ID's subject, and a passkey's deletion its credential ID, in clear.
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--rate-limit", "1:1"], logLevel: "info")
        defer { server.stop() }
        var refused = 0
        for path in ["/demo/identities/APPLESUBJECT77", "/demo/credentials/CREDENTIALID77"] {
            for _ in 0..<25 where try await server.request(path, cookie: "webauthn_session=forged", method: "DELETE").status == 429 { refused += 1 }
        }
        server.stop()
        let throttled = server.log.split(separator: "\n").filter { $0.contains("event=throttled") }
        #expect(refused > 0 && !throttled.isEmpty, "\(refused) refused")
        #expect(throttled.allSatisfy { $0.contains("path=/demo/identities/:id") || $0.contains("path=/demo/credentials/:id") }, "\(throttled)")
        #expect(!server.log.contains("APPLESUBJECT77") && !server.log.contains("CREDENTIALID77"))
    }

    @Test("the audit trail: refusals a stranger causes are kept to a budget per address; changes to an account are throttled and always written")
    func auditFlood() async throws {
        // Red team: a self-registered account renaming itself in a loop wrote 900 audit lines a
        // second; failed sign-ins without a cookie 90 a second per address; and refusals to enroll
        // onto a taken name, budgeted by the account they named, hid that account's own changes.
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--rate-limit", "off"], logLevel: "notice")
        defer { server.stop() }
        func register(_ name: String) async throws -> String? {
            let key = SoftwareAuthenticator(profile: .platformPasskey)
            let options = try await server.request("/attestation/options", ["username": .string(name)])
            let parts = try key.register(
                rpId: ServeProcess.rpId, origin: ServeProcess.origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!,
                userHandle: Base64URL.decode(options.json["user"]!["id"]!.stringValue!)!)
            return try await server.request("/attestation/result", parts.json, cookie: options.cookie).cookie
        }
        let stranger = try await register("mallory"), neighbour = try await register("nora")
        let started = ContinuousClock.now
        var renamed = 0, limited = 0
        for i in 0..<60 {
            let reply = try await server.request("/demo/account", ["displayName": .string("M \(i)")], cookie: stranger, method: "PATCH")
            if reply.ok { renamed += 1 } else if reply.status == 429 && reply.errorMessage.hasPrefix("rate_limited") { limited += 1 }
        }
        for _ in 0..<150 { _ = try await server.request("/assertion/result", ["id": "AAAA"]) }
        for _ in 0..<100 { _ = try await server.request("/attestation/options", ["username": "nora"]) }  // 409, enrollment_refused
        try await Task.sleep(for: .milliseconds(300))
        _ = try await server.request("/assertion/result", ["id": "AAAA"])  // written, with the count of those that were not
        let seconds = Double((ContinuousClock.now - started).components.seconds) + 1
        #expect(try await server.request("/demo/account", ["displayName": "Nora N"], cookie: neighbour, method: "PATCH").ok)
        server.stop()
        let lines = server.log.split(separator: "\n")
        func field(_ line: Substring, _ name: String) -> Substring? {
            line.split(separator: " ").first { $0.hasPrefix(name + "=") }.map { $0.dropFirst(name.count + 1) }
        }
        // Renames: 20 at once, then one a second; each one made is written.
        #expect(renamed >= 20 && Double(renamed) <= 21 + seconds && renamed + limited == 60, "\(renamed) renamed, \(limited) limited in \(seconds) s")
        let renames = lines.filter { $0.contains("event=account_renamed") }
        #expect(renames.count == renamed + 1 && renames.allSatisfy { field($0, "suppressed") == nil }, "\(renames.count) lines, \(renamed) + 1 renamed")
        // Refusals and failures, by the address: the burst (50) and 5 a second, and nothing lost silently.
        let refusals = lines.filter { $0.contains("event=sign_in_failed") || $0.contains("event=enrollment_refused") || $0.contains("event=throttled") }
        #expect(refusals.count >= 50 && Double(refusals.count) <= 50 + seconds * 5, "\(refusals.count) in \(seconds) s")
        let counted = refusals.compactMap { field($0, "suppressed").flatMap { Int($0) } }.reduce(0, +)
        #expect((251...(251 + limited)).contains(refusals.count + counted), "\(refusals.count) written, \(counted) counted, \(limited) throttled")
        // The neighbour's change, after a stranger spent the address's budget on refusals naming her: written.
        #expect(renames.last?.contains("account=") == true && field(renames.last!, "account") != field(renames.first!, "account"))
    }

    @Test("well-known files are served from configuration")
    func wellKnown() async throws {
        let server = try await ServeProcess(
            database: ServeProcess.temporaryDatabase(),
            extra: ["--related-origin", "https://example.co.uk", "--apple-app-id", "ABCDE12345.com.example.app"])
        defer { server.stop() }
        let related = try await server.request("/.well-known/webauthn")
        #expect(related.json["origins"]?.arrayValue?.first?.stringValue == "https://example.co.uk")
        let apple = try await server.request("/.well-known/apple-app-site-association")
        #expect(apple.json["webcredentials"]?["apps"]?.arrayValue?.first?.stringValue == "ABCDE12345.com.example.app")
        let page = try await server.request("/")
        #expect(page.status == 200)
    }

    /// SQLite, and the throw-away PostgreSQL when `make test` started one.
    static let sharedDatabases: [String] = ["sqlite"] + (ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"] != nil ? ["postgres"] : [])

    @Test("two serve processes sharing one database: one assertion sent to both at once succeeds exactly once", arguments: sharedDatabases)
    func twoInstances(kind: String) async throws {
        let database = kind == "postgres" ? ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]! : ServeProcess.temporaryDatabase()
        let a = try await ServeProcess(database: database)
        let b = try await ServeProcess(database: database)
        defer { a.stop(); b.stop() }
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let username = "carol-\(UUID().uuidString)"
        let (id, _) = try await register(a, authenticator, username: username)
        for round in 0..<5 {
            let request = try await b.request("/assertion/options", ["username": .string(username)])
            let assertion = try authenticator.authenticate(
                rpId: rpId, origin: origin, challenge: Base64URL.decode(request.json["challenge"]!.stringValue!)!, credentialId: id)
            // The browser's cookie goes to whichever instance the balancer picks (no sticky sessions).
            async let first = a.request("/assertion/result", assertion.json, cookie: request.cookie)
            async let second = b.request("/assertion/result", assertion.json, cookie: request.cookie)
            let replies = try await [first, second]
            #expect(replies.filter(\.ok).count == 1, "round \(round): \(replies.map(\.errorMessage))")
        }
        if kind == "sqlite" {
            let store = try await SQLiteStore.open(path: database)
            #expect(try await store.credential(id: id)?.signCount == 5)
            try await store.close()
        } else {
            #expect(try await PostgresStore.open(url: database, connections: 1).credential(id: id)?.signCount == 5)
        }
    }

    @Test("SIGKILL under a load of registrations loses no acknowledged credential, and the database reopens", arguments: sharedDatabases)
    func crashSafety(kind: String) async throws {
        let database = kind == "postgres" ? ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]! : ServeProcess.temporaryDatabase()
        let server = try await ServeProcess(database: database)
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let acknowledged = AcknowledgedIDs()
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        for i in 0..<1000 {
                            guard
                                let (id, _) = try? await register(
                                    server, authenticator, username: "crash-\(kind)-\(worker)-\(i)-\(UUID().uuidString.prefix(8))")
                            else { return }
                            acknowledged.add(id)
                        }
                    }
                }
            }
        }
        while acknowledged.count < 40 { try await Task.sleep(for: .milliseconds(20)) }
        server.kill()
        _ = await load.result
        if kind == "sqlite" {
            let store = try await SQLiteStore.open(path: database)
            for id in acknowledged.all { #expect(try await store.credential(id: id) != nil) }
            try await store.close()
        } else {
            let store = try await PostgresStore.open(url: database, connections: 1)
            for id in acknowledged.all { #expect(try await store.credential(id: id) != nil) }
        }
        let restarted = try await ServeProcess(database: database)
        defer { restarted.stop() }
        #expect(try await restarted.request("/attestation/options", ["username": "after-crash"]).ok)
    }
}

/// Credential ids the server acknowledged, collected from concurrent tasks.
final class AcknowledgedIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [[UInt8]] = []
    func add(_ id: [UInt8]) { lock.lock(); ids.append(id); lock.unlock() }
    var count: Int { lock.lock(); defer { lock.unlock() }; return ids.count }
    var all: [[UInt8]] { lock.lock(); defer { lock.unlock() }; return ids }
}
