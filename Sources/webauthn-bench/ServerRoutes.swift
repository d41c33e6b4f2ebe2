import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import WebAuthnCore
import WebAuthnSQLite
import WebAuthnServer
import WebAuthnTesting
import _WebAuthnEncoding

/// The server's sign-in routes without HTTP: `WebAuthnRoutes` on a SQLite file (WAL,
/// `synchronous=FULL`, group commit), called through Hummingbird's router in this process by 32
/// concurrent browsers, half of them signing in by name (as `webauthn-dev loadtest` does over
/// HTTP). What it reports is the server's CPU per sign-in: the process's CPU, less what the
/// browsers' own work took (signing, building and reading the JSON), timed on their threads
/// between the awaits. Set
/// beside the engine's `es256-authentication` and the loadtest's figure, it splits a sign-in's
/// cost into the engine, the routes and store, and HTTP (Docs/Benchmark.md).
struct ServerRoutesFixture {
    static let rpId = "example.com", origin = "https://example.com", users = 64, browsers = 32

    /// The request context: no socket, so no client address (throttling is off here).
    struct Context: RequestContext, RemoteAddressRequestContext {
        struct Source: RequestContextSource { let logger: Logger }
        var coreContext: CoreRequestContextStorage
        var remoteAddress: SocketAddress? { nil }
        init(source: Source) { coreContext = .init(source: source) }
    }

    /// Collects a response body.
    final class Body: ResponseBodyWriter, @unchecked Sendable {
        var bytes: [UInt8] = []
        func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    struct User: Sendable {
        let name: String
        let credentialID: [UInt8]
        let authenticator: SoftwareAuthenticator
    }

    let responder: any HTTPResponder<Context>
    let store: SQLiteStore
    let directory: URL
    let users: [User]
    let logger: Logger

    static func make() async throws -> ServerRoutesFixture {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webauthn-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try await SQLiteStore.open(path: directory.appendingPathComponent("bench.sqlite").path)
        let rp = try RelyingParty(id: rpId, name: "Bench", origins: [origin])
        let engine = WebAuthnEngine(relyingParty: rp, credentials: store, challenges: store, accounts: store)
        // As `webauthn serve --rate-limit off` behind HTTPS, without the demo page.
        let routes = try WebAuthnRoutes(
            engine: engine, accounts: store, sessions: store, configuration: ServerConfiguration(secureCookies: true, demo: false, rateLimit: nil))
        let router = Router(context: Context.self)
        router.addRoutes(routes.routes(context: Context.self))
        var logger = Logger(label: "webauthn-bench")
        logger.logLevel = .warning  // `serve --log-level warning`: no audit lines
        logger[metadataKey: "hb.request.id"] = "0"
        let fixture = ServerRoutesFixture(responder: router.buildResponder(), store: store, directory: directory, users: [], logger: logger)
        do {
            return try await fixture.registered()
        } catch {
            await fixture.close()
            throw error
        }
    }

    /// The same fixture with ``users`` accounts, each with a passkey of its own.
    func registered() async throws -> ServerRoutesFixture {
        var users: [User] = []
        for i in 0..<Self.users {
            let name = "bench-\(i)"
            let (options, cookie) = try await post("/attestation/options", ["username": .string(name), "displayName": .string(name)])
            guard let challenge = options["challenge"]?.stringValue.flatMap(Base64URL.decode),
                let handle = options["user"]?["id"]?.stringValue.flatMap(Base64URL.decode)
            else { throw WebAuthnError(.responseMalformed, "registration options without a challenge or a user") }
            let authenticator = SoftwareAuthenticator(profile: .platformPasskey)
            let parts = try authenticator.register(rpId: Self.rpId, origin: Self.origin, challenge: challenge, userHandle: handle)
            _ = try await post("/attestation/result", bytes: parts.jsonBytes, cookie: cookie)
            users.append(User(name: name, credentialID: parts.id, authenticator: authenticator))
        }
        return ServerRoutesFixture(responder: responder, store: store, directory: directory, users: users, logger: logger)
    }

    func close() async {
        try? await store.close()
        try? FileManager.default.removeItem(at: directory)
    }

    func post(_ path: String, _ body: JSONObject, cookie: String? = nil) async throws -> (JSONValue, String?) {
        try await post(path, bytes: JSONValue.object(body).serializedBytes(), cookie: cookie)
    }

    /// One request through the router; the answer's JSON and its session cookie (`name=value`).
    func post(_ path: String, bytes: [UInt8], cookie: String? = nil) async throws -> (JSONValue, String?) {
        var ignored = 0.0
        return try await post(path, bytes: bytes, cookie: cookie, clientCPU: &ignored)
    }

    /// The same, adding the CPU time of reading the answer (the browser's work) to `clientCPU`.
    func post(_ path: String, bytes: [UInt8], cookie: String?, clientCPU: inout Double) async throws -> (JSONValue, String?) {
        var fields: HTTPFields = [.contentType: "application/json", .contentLength: String(bytes.count)]
        if let cookie { fields[.cookie] = cookie }
        let request = Request(
            head: HTTPRequest(method: .post, scheme: "https", authority: Self.rpId, path: path, headerFields: fields),
            body: RequestBody(buffer: ByteBuffer(bytes: bytes)))
        let response = try await responder.respond(to: request, context: Context(source: .init(logger: logger)))
        let body = Body()
        try await response.body.write(body)
        let t = Self.threadCPU()
        defer { clientCPU += Self.threadCPU() - t }
        let json = try JSONValue.parse(body.bytes)
        guard json["status"]?.stringValue == "ok" else {
            throw WebAuthnError(.requestMalformed, "\(path) answered \(json["errorMessage"]?.stringValue ?? "without a status")")
        }
        return (json, response.headers[.setCookie].flatMap { $0.split(separator: ";").first.map(String.init) })
    }

    /// This thread's CPU time in seconds.
    static func threadCPU() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// This process's CPU time (user and system, every thread) in seconds.
    static func processCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec)
            / 1e6
    }

    /// Sign-ins for about `seconds`: how many, and the server's CPU seconds per sign-in.
    func measure(seconds: Double) async throws -> (signIns: Int, serverCPU: Double) {
        let deadline = ContinuousClock.now + .milliseconds(Int((seconds * 1000).rounded()))
        let start = Self.processCPU()
        let (signIns, clientCPU) = try await withThrowingTaskGroup(of: (Int, Double).self) { group in
            for lane in 0..<Self.browsers {
                group.addTask {
                    var (count, client) = (0, 0.0)
                    var i = lane
                    while ContinuousClock.now < deadline {
                        let user = users[i % users.count]
                        let named = i % 2 == 0
                        i += Self.browsers
                        // The browser's own work is timed on its thread, between the awaits.
                        var t = Self.threadCPU()
                        let ask = JSONValue.object(named ? ["username": .string(user.name)] : [:]).serializedBytes()
                        client += Self.threadCPU() - t
                        let (options, cookie) = try await post("/assertion/options", bytes: ask, cookie: nil, clientCPU: &client)
                        t = Self.threadCPU()
                        guard let challenge = options["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
                            throw WebAuthnError(.responseMalformed, "sign-in options without a challenge")
                        }
                        let parts = try user.authenticator.authenticate(
                            rpId: Self.rpId, origin: Self.origin, challenge: challenge, credentialId: user.credentialID)
                        let answer = parts.jsonBytes
                        client += Self.threadCPU() - t
                        _ = try await post("/assertion/result", bytes: answer, cookie: cookie, clientCPU: &client)
                        count += 1
                    }
                    return (count, client)
                }
            }
            return try await group.reduce(into: (0, 0.0)) {
                $0.0 += $1.0; $0.1 += $1.1
            }
        }
        let total = Self.processCPU() - start
        return (signIns, max(0, total - clientCPU) / Double(max(1, signIns)))
    }
}
