import Foundation
import Testing
import WebAuthnPostgres
import _WebAuthnEncoding

/// `webauthn-dev loadtest` against `webauthn serve` (loopback, a couple of seconds):
/// it registers its users, signs them in with and without a user name, and reports
/// throughput, latency percentiles and the server's CPU per sign-in.
@Suite("Load test", .serialized)
struct LoadTestTests {
    /// Runs `webauthn-dev loadtest` (or, `through` the deployable binary, `webauthn loadtest`, which
    /// runs the same) against `server` with `extra` arguments; its exit status and output.
    /// Waited for on a thread of its own, not one of the cooperative pool's (two here), which every
    /// other test of the process needs.
    static func loadTest(_ server: ServeProcess, _ extra: [String], through tool: String = "webauthn-dev") async throws -> (Int32, String) {
        try await loadTest(port: server.port, extra, through: tool)
    }

    /// The same, against the server (or proxy) on `port`.
    static func loadTest(port: Int, _ extra: [String], through tool: String = "webauthn-dev") async throws -> (Int32, String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try runLoadTest(port: port, extra, through: tool) }) }.start()
        }
    }

    static func runLoadTest(port: Int, _ extra: [String], through tool: String) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = ServeProcess.binary.deletingLastPathComponent().appendingPathComponent(tool)
        process.arguments =
            ["loadtest", "--url", "http://127.0.0.1:\(port)", "--rp-id", ServeProcess.rpId, "--origin", ServeProcess.origin] + extra
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    @Test(
        "webauthn loadtest (webauthn-dev's, on SQLite through the deployable binary) against webauthn serve: every sign-in succeeds and the report carries its figures",
        arguments: ServerTests.sharedDatabases)
    func loadTest(kind: String) async throws {
        let database = kind == "postgres" ? ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]! : ServeProcess.temporaryDatabase()
        // On PostgreSQL one connection: every statement that arrives while it is busy goes in a pipeline.
        let server = try await ServeProcess(database: database, extra: ["--rate-limit", "off"] + (kind == "postgres" ? ["--db-connections", "1"] : []))
        defer { server.stop() }
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("loadtest-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        let (status, text) = try await Self.loadTest(
            server,
            [
                "--users", "8", "--duration", "2", "--concurrency", "4", "--usernameless", "0.5", "--server-pid", String(server.process.processIdentifier),
                "--json", report.path,
            ], through: kind == "sqlite" ? "webauthn" : "webauthn-dev")
        #expect(status == 0, "\(text)")
        let json = try JSONValue.parse([UInt8](Data(contentsOf: report)))
        #expect((json["signIns"]?.numberValue ?? 0) > 0, "\(text)")
        #expect(json["failures"]?.numberValue == 0, "\(text)")
        let p50 = json["latencyMs"]?["p50"]?.numberValue ?? 0, p99 = json["latencyMs"]?["p99"]?.numberValue ?? 0
        #expect(p50 > 0 && p99 >= p50, "\(text)")
        #expect((json["server"]?["cpuMicrosecondsPerSignIn"]?.numberValue ?? 0) > 0, "\(text)")
        #expect((json["server"]?["rssBytes"]?.numberValue ?? 0) > 0, "\(text)")
        #expect(text.contains("sign-ins/s") && text.contains("p99"), "\(text)")
    }

    @Test("a throttling server: the report names the failures and says how to run the server")
    func throttled() async throws {
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--rate-limit", "1:1"])
        defer { server.stop() }
        let (_, text) = try await Self.loadTest(server, ["--users", "2", "--duration", "1", "--concurrency", "2"])
        #expect(text.contains("rate_limited") && text.contains("--rate-limit off"), "\(text)")
    }

    /// Operator review (helper 72): through nginx, whose `keepalive_requests` ends a kept-alive
    /// connection with `Connection: close`, each of the 32 browsers counted one failure.
    @Test("a server that ends a connection with Connection: close costs a new connection, not a failure")
    func connectionCloseIsNoFailure() async throws {
        let server = try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--rate-limit", "off"])
        defer { server.stop() }
        let proxy = try KeepAliveLimitProxy(upstreamPort: server.port, limit: 7)
        defer { proxy.stop() }
        let (status, text) = try await Self.loadTest(
            port: proxy.port, ["--users", "4", "--duration", "2", "--concurrency", "2", "--usernameless", "0.5"])
        #expect(status == 0, "\(text)")
        #expect(proxy.connectionsClosed >= 2, "\(text)")
        #expect(text.contains("failures: 0"), "\(text)")
    }

    /// Operator review (helper 72): every start on an existing PostgreSQL database printed libpq's
    /// `NOTICE:  relation "schema_version" already exists, skipping` on standard error, outside the log.
    @Test("serve on a PostgreSQL database already migrated writes no NOTICE from the server", .enabled(if: StoreContractTests.postgresURL != nil))
    func noPostgresNotices() async throws {
        let url = try #require(StoreContractTests.postgresURL)
        try await PostgresStore.open(url: url, connections: 1).close()  // migrated before the start below
        let server = try await ServeProcess(database: url, extra: ["--db-connections", "1"])
        defer { server.stop() }
        #expect(try await server.request("/healthz").status == 200)
        server.stop()
        #expect(!server.log.contains("NOTICE:"), "\(server.log)")
    }
}
