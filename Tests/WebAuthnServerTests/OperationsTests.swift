import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Logging
import Testing
import WebAuthnCore
import WebAuthnMetadata
import WebAuthnServer
import _WebAuthnEncoding

/// `GET /healthz`, `/readyz` and `/metrics` of `buildApplication`, over loopback HTTP.
@Suite("Operations: health, readiness, metrics")
struct OperationsTests {
    static func get(_ port: Int, _ path: String, method: String = "GET", body: String? = nil, headers: [String: String] = [:]) async throws -> (
        status: Int, body: String
    ) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        let (data, response) = try await URLSession(configuration: configuration).data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// A credential store that always fails, as a database that is down does.
    final class FailingCredentials: CredentialStore {
        struct Down: Error {}
        func credential(id: [UInt8]) async throws -> CredentialRecord? { throw Down() }
        func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] { throw Down() }
        func insert(_ record: CredentialRecord) async throws { throw Down() }
        func update(_ record: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool { throw Down() }
        func delete(id: [UInt8]) async throws -> Bool { throw Down() }
    }

    static func serve(
        engine: WebAuthnEngine, metadata: MetadataService? = nil, metrics: MetricsExposure = .loopback, rateLimit: RateLimit? = RateLimit(),
        _ body: (Int) async throws -> Void
    ) async throws {
        var logger = Logger(label: "test.operations")
        logger.logLevel = .critical
        try await EmbeddingTests.serving(
            { running in
                try buildApplication(
                    engine: engine, accounts: InMemoryAccountStore(), sessions: InMemorySessionStore(),
                    configuration: ApplicationConfiguration(
                        port: 0, routes: ServerConfiguration(rateLimit: rateLimit), logger: logger, onServerRunning: running, metadata: metadata,
                        metrics: metrics))
            }, body)
    }

    @Test("/healthz answers; /readyz is 503 until the metadata service installs a BLOB, then 200; /metrics counts ceremonies, throttling and metadata")
    func healthReadinessMetrics() async throws {
        let script = MetadataServiceTests.Script()
        let standIn = try MetadataServiceTests.standIn(script)
        defer { standIn.stop() }
        let engine = try MetadataServiceTests.engine()
        let service = try MetadataServiceTests.service(standIn.url, engine: engine)
        // 0.2 requests a second per address: a burst of two, then 429.
        try await Self.serve(engine: engine, metadata: service, rateLimit: RateLimit(perAddress: 0.2)) { port in
            let health = try await Self.get(port, "/healthz")
            #expect(health.status == 200 && health.body == #"{"status":"ok"}"#)
            // Before any ceremony the failure counters are there, at 0 (operator review, helper 72: the
            // body was empty until the first ceremony, so an alert on their rate found no series).
            let first = try await Self.get(port, "/metrics").body
            #expect(
                first.contains(#"webauthn_store_errors_total{kind="storage"} 0"#) && first.contains(#"webauthn_throttled_total{scope="address"} 0"#), "\(first)"
            )
            let waiting = try await Self.get(port, "/readyz")
            #expect(waiting.status == 503 && waiting.body.contains(#""metadata":"missing""#) && waiting.body.contains(#""store":"ok""#), "\(waiting.body)")
            script.set(.blob(try MetadataServiceTests.pki.blob(no: 1)))
            #expect(MetadataServiceTests.code(await service.refresh()) == "installed")
            let ready = try await Self.get(port, "/readyz")
            #expect(ready.status == 200 && ready.body.contains(#""status":"ready""#), "\(ready.body)")

            #expect(try await Self.get(port, "/attestation/options", method: "POST", body: #"{"username":"alice"}"#).status == 200)
            #expect(try await Self.get(port, "/attestation/result", method: "POST", body: "{").status == 400)
            #expect(try await Self.get(port, "/assertion/options", method: "POST", body: "{}").status == 429)

            let metrics = try await Self.get(port, "/metrics")
            #expect(metrics.status == 200)
            for line in [
                #"webauthn_ceremonies_total{ceremony="registration_options",outcome="success",code="ok"} 1"#,
                #"webauthn_ceremonies_total{ceremony="registration",outcome="failure",code="json_malformed"} 1"#,
                #"webauthn_ceremonies_total{ceremony="authentication_options",outcome="failure",code="rate_limited"} 1"#,
                #"webauthn_throttled_total{scope="address"} 1"#,
                #"webauthn_ceremony_duration_seconds_count{ceremony="registration_options"} 1"#,
                "webauthn_metadata_installed 1", "webauthn_metadata_blob_number 1", "webauthn_metadata_last_fetch_success 1",
                #"webauthn_metadata_fetches_total{result="installed"} 1"#, "webauthn_metadata_next_update_timestamp_seconds 4070908800",
            ] {
                #expect(metrics.body.contains(line), "missing: \(line)\n\(metrics.body)")
            }
            #expect(!metrics.body.contains("alice"))
            // Scraped twice, the fetch counter does not count the same fetch again.
            #expect(try await Self.get(port, "/metrics").body.contains(#"webauthn_metadata_fetches_total{result="installed"} 1"#))
            // Relayed by a proxy (even one on this host): not for the loopback exposure.
            #expect(try await Self.get(port, "/metrics", headers: ["X-Forwarded-For": "203.0.113.9"]).status == 404)
            // Whatever header the proxy adds (red team, thirteenth pass: nginx with X-Real-IP alone).
            for header in ["X-Real-IP", "Forwarded", "Via", "X-Forwarded-Proto", "True-Client-IP", "X-Forwarded", "Forwarded-For", "X-Envoy-External-Address"] {
                #expect(try await Self.get(port, "/metrics", headers: [header: "203.0.113.9"]).status == 404, "\(header)")
            }
            // Each route at one spelling, so that a proxy's rule on the exact path covers it (red
            // team, eighteenth pass: `/metrics/`, `//metrics` and `http://h//metrics/` were served).
            for target in ["/metrics/", "//metrics", "http://h//metrics/", "/metrics//", "/healthz/", "//healthz", "/readyz/"] {
                let connection = try RawConnection(port: port)
                defer { connection.close() }
                try connection.send("GET \(target) HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                let answer = try connection.receive()
                #expect(answer.hasPrefix("HTTP/1.1 404") && answer.contains("Content-Security-Policy"), "\(target): \(answer.prefix(200))")
            }
            #expect(try await Self.get(port, "/metrics?x=1").status == 200)
        }
    }

    @Test("a store that does not answer makes /readyz 503 and counts store errors; --metrics off serves no /metrics")
    func storeDownAndMetricsOff() async throws {
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"])
        let engine = WebAuthnEngine(relyingParty: rp, credentials: FailingCredentials(), challenges: InMemoryChallengeStore())
        try await Self.serve(engine: engine, metrics: .anyone) { port in
            let ready = try await Self.get(port, "/readyz")
            #expect(ready.status == 503 && ready.body.contains(#""store":"failed""#) && !ready.body.contains("metadata"), "\(ready.body)")
            #expect(try await Self.get(port, "/assertion/options", method: "POST", body: #"{"username":"bob"}"#).status == 500)
            let metrics = try await Self.get(port, "/metrics", headers: ["X-Forwarded-For": "203.0.113.9"])
            #expect(metrics.status == 200 && metrics.body.contains(#"webauthn_store_errors_total{kind="storage"} 1"#), "\(metrics.body)")
            #expect(metrics.body.contains(#"webauthn_ceremonies_total{ceremony="authentication_options",outcome="failure",code="internal_error"} 1"#))
        }
        try await Self.serve(engine: engine, metrics: .off) { port async throws in
            #expect(try await Self.get(port, "/metrics").status == 404)
            #expect(try await Self.get(port, "/healthz").status == 200)
        }
    }

    /// Polls `path` until it answers `status` (at most 15 s).
    static func await(_ server: ServeProcess, _ path: String, status: Int) async throws -> ServeProcess.Reply {
        let deadline = Date().addingTimeInterval(45)
        while true {
            let reply = try await server.request(path)
            if reply.status == status || Date() > deadline { return reply }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test("webauthn serve --mds-url --mds-root --mds-cache: ready once the BLOB is fetched; restarted with the service down, ready from the cache")
    func serveWithMetadataService() async throws {
        let script = MetadataServiceTests.Script()
        script.set(.blob(try MetadataServiceTests.pki.blob(no: 4), etag: "\"v4\""))
        let standIn = try MetadataServiceTests.standIn(script)
        let directory = MetadataServiceTests.temporaryDirectory()
        let root = directory + "-root.pem"
        try Data(MetadataServiceTests.pki.root.pem.utf8).write(to: URL(fileURLWithPath: root))
        let database = ServeProcess.temporaryDatabase()
        defer {
            for path in [directory, root, database] { try? FileManager.default.removeItem(atPath: path) }
        }
        let flags = ["--mds-url", standIn.url.absoluteString, "--mds-root", root, "--mds-cache", directory]
        let first = try await ServeProcess(database: database, extra: flags)
        let ready = try await Self.await(first, "/readyz", status: 200)
        #expect(ready.json["metadata"]?.stringValue == "installed", "\(ready.json)")
        first.stop()
        standIn.stop()
        let second = try await ServeProcess(database: database, extra: flags)
        defer { second.stop() }
        #expect(try await Self.await(second, "/readyz", status: 200).status == 200)
        // Its first fetch fails (connection refused) and is counted; the cached BLOB stays.
        var text = ""
        let deadline = Date().addingTimeInterval(45)
        while !text.contains("metadata_unavailable") && Date() < deadline {
            text = try await second.request("/metrics").json.stringValue ?? ""
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(
            text.contains("webauthn_metadata_blob_number 4") && text.contains(#"webauthn_metadata_fetches_total{result="metadata_unavailable"}"#), "\(text)")
        #expect(try await second.request("/metrics", headers: ["X-Forwarded-For": "203.0.113.9"]).status == 404)
    }
}
