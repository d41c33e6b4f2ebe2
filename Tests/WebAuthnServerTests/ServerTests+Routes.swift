import Foundation
import Testing
import WebAuthnSQLite
import WebAuthnServer
import _WebAuthnEncoding

extension ServerTests {
    @Test("a request no route takes answers in the failure envelope: 404 not_found, or 405 method_not_allowed with Allow")
    func unknownRoutes() async throws {
        // Red team, rounds 26 and 27: both were an empty 404, the one refusal without a JSON body
        // and a code (the demo page's `r.json()` threw on it), and a wrong method looked like a
        // path nothing serves.
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase())
        defer { server.stop() }
        for path in ["/nowhere", "/demo/nowhere", "/attestation/options/x", "/demo/credentials/a/b"] {
            let reply = try await server.request(path)
            #expect(reply.status == 404 && reply.errorMessage == "not_found: nothing is served at this path", "\(path): \(reply.errorMessage)")
            #expect(reply.headers["content-type"] == "application/json" && reply.headers["content-security-policy"] != nil)
        }
        let cases: [(method: String, path: String, allow: String)] = [
            ("GET", "/attestation/options", "POST"), ("PUT", "/assertion/result", "POST"), ("PUT", "/demo/account", "DELETE, PATCH"),
            ("POST", "/demo/session", "GET, HEAD"), ("DELETE", "/demo/credentials", "GET, HEAD"), ("GET", "/demo/credentials/abc", "DELETE, PATCH"),
            ("POST", "/healthz", "GET, HEAD"), ("POST", "/", "GET, HEAD"),
        ]
        for (method, path, allow) in cases {
            let reply = try await server.request(path, method: method)
            #expect(reply.status == 405 && reply.headers["allow"] == allow, "\(method) \(path): \(reply.status) \(reply.headers)")
            #expect(reply.errorMessage == "method_not_allowed: this path answers \(allow), not \(method)", "\(reply.errorMessage)")
        }
        // /metrics refused to a stranger answers as a path nothing serves, body and all.
        let metrics = try await server.request("/metrics", headers: ["X-Forwarded-For": "203.0.113.9"])
        let nowhere = try await server.request("/nowhere")
        #expect(metrics.status == 404 && metrics.json == nowhere.json, "\(metrics.json)")
        // With any method (re-check of round 27: POST got 405 with `Allow: GET, HEAD`).
        let posted = try await server.request("/metrics", method: "POST", headers: ["X-Forwarded-For": "203.0.113.9"])
        #expect(posted.status == 404 && posted.json == nowhere.json && posted.headers["allow"] == nil, "\(posted.json)")
        // Another spelling of a served path is not that path; HEAD gets the status alone.
        for (request, status) in [("GET //healthz", "404"), ("HEAD /nowhere", "404"), ("HEAD /attestation/options", "405")] {
            let connection = try RawConnection(port: server.port)
            defer { connection.close() }
            try connection.send("\(request) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            let answer = connection.drain().text
            #expect(answer.hasPrefix("HTTP/1.1 \(status)"), "\(request): \(answer.prefix(120))")
            if request.hasPrefix("HEAD") {
                // No body, and the length GET would send (re-check of round 27: it said 0).
                #expect(!answer.contains("{") && !answer.contains("Content-Length: 0\r\n"), "\(request): \(answer)")
            }
        }
    }
}

extension ServerTests {
    @Test("a logged path names no passkey or Apple ID, however the route's word is spelled, and a path without one is kept as it is")
    func loggedPaths() {
        let cases: [(path: String, shown: String)] = [
            ("/demo/credentials/ID1", "/demo/credentials/:id"), ("/demo/identities/SUB/x", "/demo/identities/:id/x"),
            ("//demo//credentials//ID2/", "//demo//credentials//:id/"), ("/DEMO/CREDENTIALS/ID3", "/DEMO/CREDENTIALS/:id"),
            // Every letter percent-encoded: the longest spelling (33 bytes).
            ("/demo/%63%72%65%64%65%6E%74%69%61%6C%73/ID4", "/demo/%63%72%65%64%65%6E%74%69%61%6C%73/:id"),
            ("/a/identities/ID5/credentials/ID6", "/a/identities/:id/credentials/:id"),
            ("/demo/credentials", "/demo/credentials"), ("/demo/credentials/", "/demo/credentials/"), ("", ""), ("/", "/"),
            ("/é/credentials/ÎD7", "/é/credentials/:id"), ("/demo/credentialsX/ID8", "/demo/credentialsX/ID8"),
        ]
        for (path, shown) in cases { #expect(LoggedPath.withoutIdentifiers(path) == shown, "\(path)") }
        // The re-check of round 27's worst 404 (40,000 segments): kept whole, and the word at
        // its end still redacts what follows.
        let long = String(repeating: "/a", count: 40_000)
        #expect(LoggedPath.withoutIdentifiers(long) == long)
        #expect(LoggedPath.withoutIdentifiers(long + "/credentials/ID9") == long + "/credentials/:id")
    }

    @Test("an http:// origin beside https:// ones is warned of at start: no session cookie is Secure then")
    func mixedOriginsWarned() async throws {
        // Red team, thirty-fifth pass: the https site's cookie lost Secure and __Host- without a word.
        let warning = "session cookies are not Secure"
        let mixed = try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--origin", "http://localhost:8080"])
        defer { mixed.stop() }
        #expect(await mixed.logEventually(contains: warning), "\(mixed.log)")
        let options = try await mixed.request("/assertion/options", ["username": ""])
        #expect(options.cookie?.hasPrefix("webauthn_session=") == true && options.headers["set-cookie"]?.contains("Secure") == false)
        // https origins alone: Secure, and no warning (it is written before the server listens).
        let secure = try await ServeProcess(database: ServeProcess.temporaryDatabase())
        defer { secure.stop() }
        #expect(!secure.log.contains(warning))
        #expect(try await secure.request("/assertion/options", ["username": ""]).headers["set-cookie"]?.contains("; Secure;") == true)
    }

    @Test("a database (its WAL too) or a secret file that other users may read is warned of at start, with the chmod that mends it")
    func readableSecretsWarned() async throws {
        // Operator review (helper 72): the database (which holds the secret) was 0644, and a
        // 0644 --secret-file was taken without a word. Red team, fortieth pass: a WAL left 0644
        // beside a 0600 file was not warned of.
        let database = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) } }
        try await SQLiteStore.open(path: database).close()
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("readable-secret-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: secret) }
        _ = FileManager.default.createFile(atPath: secret, contents: Data(String(repeating: "k", count: 40).utf8), attributes: [.posixPermissions: 0o644])
        // Owner-only files: no warning.
        let quiet = try await ServeProcess(database: database)
        quiet.stop()
        #expect(!quiet.log.contains("open to other users"), "\(quiet.log)")
        let resolved = URL(fileURLWithPath: database).resolvingSymlinksInPath().path
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: database)
        let open = try await ServeProcess(database: database, extra: ["--secret-file", secret], sharedSecret: false)
        #expect(
            await open.logEventually(contains: "the database file \(resolved) is open to other users (mode 644); it holds the sessions: chmod 600 \(resolved)"),
            "\(open.log)")
        #expect(await open.logEventually(contains: "--secret-file \(secret) is open to other users (mode 644); it holds the server secret"))
        open.stop()
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database)
        // A WAL that outlives its server (another process holds it open here; a SIGKILL leaves one).
        let holder = try await SQLiteStore.open(path: database)
        _ = try await holder.serverSecret()
        try FileManager.default.setAttributes([.posixPermissions: 0o620], ofItemAtPath: database + "-wal")
        let wal = try await ServeProcess(database: database, extra: ["--trusted-proxy", "::/00"])
        defer { wal.stop() }
        try await holder.close()
        #expect(await wal.logEventually(contains: "the database file \(resolved)-wal is open to other users (mode 620)"), "\(wal.log)")
        #expect(await wal.logEventually(contains: "a --trusted-proxy range is /0"), "\(wal.log)")
        #expect(!wal.log.contains("the database file \(resolved) is open"))
    }
}
