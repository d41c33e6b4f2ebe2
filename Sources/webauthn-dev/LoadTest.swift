import ArgumentParser
import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

/// `webauthn-dev loadtest`: software authenticators register users through the FIDO2
/// server API, then sign in for a while, as many browsers at once; prints throughput,
/// latency percentiles (an HDR histogram), failures and, for a server on this machine,
/// its CPU per sign-in and memory. Loopback or your own test servers only.
struct LoadTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Register users and sign them in against a running server, concurrently; report sign-ins/s, latency and server CPU per sign-in.",
        discussion: """
            The server's rate limits are meant for strangers: run the server under test with
            --rate-limit off (one address sends every request here).
            """)

    @Option(help: "The server's base URL.") var url: String
    @Option(name: .customLong("rp-id"), help: "The server's RP ID.") var rpId: String
    @Option(help: "The origin the server accepts.") var origin: String
    @Option(help: "Users to register before signing in.") var users = 64
    @Option(help: "Seconds of sign-ins.") var duration = 10.0
    @Option(help: "Browsers at once (each keeps its own cookies).") var concurrency = 32
    @Option(help: "The share of sign-ins without a user name (discoverable), 0 to 1.") var usernameless = 0.5
    @Option(name: .customLong("server-pid"), help: "The server's process id, when it runs on this machine: CPU per sign-in and RSS.")
    var serverPID: Int32?
    @Option(help: "Write the report as JSON to this file.") var json: String?

    func validate() throws {
        guard let parsed = URL(string: url), parsed.scheme == "http", parsed.host != nil else {
            throw ValidationError("--url must be http://HOST[:PORT] (the load test speaks plain HTTP: loopback or a test network)")
        }
        guard (1...100_000).contains(users) else { throw ValidationError("--users must be 1 to 100000") }
        guard (1...1024).contains(concurrency) else { throw ValidationError("--concurrency must be 1 to 1024") }
        guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be more than 0 and at most 3600 seconds") }
        guard (0...1).contains(usernameless) else { throw ValidationError("--usernameless must be between 0 and 1") }
    }

    func run() async throws {
        let client = try LoadClient(base: url)
        let users = try await register(client)
        print("registered \(users.count) users")
        let before = ProcessCPU.sample(serverPID)
        let clientBefore = ProcessCPU.sample(getpid())
        let started = ContinuousClock.now
        let deadline = started + .milliseconds(Int(duration * 1000))
        let report = await withTaskGroup(of: WorkerReport.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    // One browser per worker; a broken connection (closed, or an answer cut short) is
                    // replaced by a new one, after a pause, so that a failing server is not spun on.
                    var report = WorkerReport()
                    var position = Position(index: worker, draw: SplitMix(state: UInt64(worker) &* 0x9E37_79B9_7F4A_7C15 &+ 1))
                    while ContinuousClock.now < deadline {
                        do {
                            try await client.withBrowser { browser in
                                try await signIns(browser, users: users, position: &position, report: &report, until: deadline)
                            }
                        } catch is LoadClient.ServerClosed {
                            // The server ended the connection with `Connection: close` (a proxy's
                            // keepalive_requests): a new one, as a browser would; a ceremony cut short
                            // by it is neither a sign-in nor a failure.
                        } catch {
                            report.fail("connection: \(error)")
                            try? await Task.sleep(for: .milliseconds(100))
                        }
                    }
                    return report
                }
            }
            return await group.reduce(into: WorkerReport()) { $0.merge($1) }
        }
        let elapsed = Self.seconds(ContinuousClock.now - started)
        let after = ProcessCPU.sample(serverPID)
        let clientAfter = ProcessCPU.sample(getpid())
        let summary = Summary(
            report: report, elapsed: elapsed, server: before.flatMap { b in after.map { ($0.cpuSeconds - b.cpuSeconds, $0.rssBytes) } },
            client: clientBefore.flatMap { b in clientAfter.map { $0.cpuSeconds - b.cpuSeconds } })
        print(summary.text(self))
        if let json { try Data(summary.json(self).serialized().utf8).write(to: URL(fileURLWithPath: json)) }
        if report.signIns == 0 { throw ExitCode(1) }
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

    struct User: Sendable {
        let name: String
        let credentialID: [UInt8]
        let authenticator: SoftwareAuthenticator
    }

    /// Registers `users` accounts, `concurrency` at a time.
    func register(_ client: LoadClient) async throws -> [User] {
        let run = String(UUID().uuidString.prefix(8)).lowercased()
        return try await withThrowingTaskGroup(of: [User].self) { group in
            let lanes = min(concurrency, users)
            for lane in 0..<lanes {
                group.addTask {
                    var made: [User] = []
                    for i in stride(from: lane, to: users, by: lanes) {
                        let name = "load-\(run)-\(i)"
                        made.append(try await client.withBrowser { browser in try await register(browser, name: name) })
                    }
                    return made
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }

    /// Registers one account with a new passkey (a fresh browser: no session, so a new name is allowed).
    func register(_ browser: LoadClient.Browser, name: String) async throws -> User {
        let options = try await browser.post("/attestation/options", ["username": .string(name), "displayName": .string(name)])
        guard options.ok, let challenge = options.json["challenge"]?.stringValue.flatMap(Base64URL.decode),
            let handle = options.json["user"]?["id"]?.stringValue.flatMap(Base64URL.decode)
        else { throw LoadTestError("registering \(name): /attestation/options answered \(options.status) \(options.message)") }
        let authenticator = SoftwareAuthenticator(profile: .platformPasskey)
        let parts = try authenticator.register(rpId: rpId, origin: origin, challenge: challenge, userHandle: handle)
        let result = try await browser.post(bytes: "/attestation/result", parts.jsonBytes)
        guard result.ok else { throw LoadTestError("registering \(name): /attestation/result answered \(result.status) \(result.message)") }
        return User(name: name, credentialID: parts.id, authenticator: authenticator)
    }

    /// Where a worker is in the user list, and its draw of usernameless sign-ins.
    struct Position {
        var index: Int
        var draw: SplitMix
    }

    /// One browser signing in, again and again, until the deadline. A refusal is counted and
    /// the loop goes on; a transport error ends this browser (thrown), and the caller opens another.
    func signIns(
        _ browser: LoadClient.Browser, users: [User], position: inout Position, report: inout WorkerReport, until deadline: ContinuousClock.Instant
    ) async throws {
        while ContinuousClock.now < deadline {
            let user = users[position.index % users.count]
            position.index += concurrency
            let discoverable = Double(position.draw.next() >> 11) / Double(1 << 53) < usernameless
            let start = ContinuousClock.now
            do {
                let options = try await browser.post("/assertion/options", discoverable ? [:] : ["username": .string(user.name)])
                guard options.ok, let challenge = options.json["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
                    throw Refusal("/assertion/options answered \(options.status) \(options.message)")
                }
                let parts = try user.authenticator.authenticate(rpId: rpId, origin: origin, challenge: challenge, credentialId: user.credentialID)
                let result = try await browser.post(bytes: "/assertion/result", parts.jsonBytes)
                guard result.ok else { throw Refusal("/assertion/result answered \(result.status) \(result.message)") }
                let micros = Self.seconds(ContinuousClock.now - start) * 1e6
                // Clamped to the histogram's range, so that every counted sign-in is in the percentiles.
                _ = report.latency.record(UInt64(min(max(1, micros.rounded()), Double(WorkerReport.maxLatencyMicros))))
                report.signIns += 1
            } catch let refusal as Refusal {
                report.fail(refusal.description)
            }
        }
    }

    /// A well-formed answer that is not a success: counted, and the browser goes on.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

struct LoadTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What one browser saw.
struct WorkerReport: Sendable {
    var signIns = 0
    var failures = 0
    var firstFailures: [String] = []
    /// The longest latency the histogram holds (60 s); longer ones are recorded as this.
    static let maxLatencyMicros: UInt64 = 60_000_000
    /// Microseconds per sign-in (options and result), 1 µs to 60 s, 3 significant digits.
    var latency = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: maxLatencyMicros, numberOfSignificantValueDigits: .three)

    mutating func fail(_ message: String) {
        failures += 1
        if firstFailures.count < 5, !firstFailures.contains(message) { firstFailures.append(String(message.prefix(300))) }
    }

    mutating func merge(_ other: WorkerReport) {
        signIns += other.signIns
        failures += other.failures
        for m in other.firstFailures where firstFailures.count < 5 && !firstFailures.contains(m) { firstFailures.append(m) }
        latency.add(other.latency)
    }
}

struct Summary {
    let report: WorkerReport
    let elapsed: Double
    /// Server CPU seconds used during the sign-ins, and its RSS after.
    let server: (cpuSeconds: Double, rssBytes: Int)?
    /// This process's CPU seconds during the sign-ins.
    let client: Double?

    var rate: Double { Double(report.signIns) / max(elapsed, 1e-9) }
    func ms(_ percentile: Double) -> Double { Double(report.latency.valueAtPercentile(percentile)) / 1000 }
    var perSignIn: Double? { server.map { $0.cpuSeconds * 1e6 / Double(max(report.signIns, 1)) } }
    var clientPerSignIn: Double? { client.map { $0 * 1e6 / Double(max(report.signIns, 1)) } }

    func text(_ options: LoadTest) -> String {
        var lines = [
            String(
                format: "%d sign-ins in %.1f s: %.0f sign-ins/s (%d browsers, %.0f%% without a user name)", report.signIns, elapsed, rate,
                options.concurrency, options.usernameless * 100),
            String(format: "latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f", ms(50), ms(90), ms(99), Double(report.latency.max) / 1000),
            "failures: \(report.failures)",
        ]
        for failure in report.firstFailures { lines.append("  \(failure)") }
        if report.firstFailures.contains(where: { $0.contains("429") || $0.contains("rate_limited") }) {
            lines.append("  (the server throttles: run it with --rate-limit off for a load test)")
        }
        if let perSignIn, let server {
            lines.append(String(format: "server: %.0f µs CPU per sign-in, RSS %.1f MiB", perSignIn, Double(server.rssBytes) / 1_048_576))
        }
        if let clientPerSignIn { lines.append(String(format: "load client: %.0f µs CPU per sign-in", clientPerSignIn)) }
        return lines.joined(separator: "\n")
    }

    func json(_ options: LoadTest) -> JSONValue {
        var o: JSONObject = [
            "url": .string(options.url), "users": .number(Double(options.users)), "concurrency": .number(Double(options.concurrency)),
            "durationSeconds": .number(elapsed), "usernamelessShare": .number(options.usernameless),
            "signIns": .number(Double(report.signIns)), "failures": .number(Double(report.failures)), "signInsPerSecond": .number(rate),
            "latencyMs": [
                "p50": .number(ms(50)), "p90": .number(ms(90)), "p99": .number(ms(99)), "max": .number(Double(report.latency.max) / 1000),
            ],
            "firstFailures": .array(report.firstFailures.map { .string($0) }),
        ]
        if let perSignIn, let server, let pid = options.serverPID {
            o["server"] = ["pid": .number(Double(pid)), "cpuMicrosecondsPerSignIn": .number(perSignIn), "rssBytes": .number(Double(server.rssBytes))]
        }
        if let clientPerSignIn { o["client"] = ["cpuMicrosecondsPerSignIn": .number(clientPerSignIn)] }
        return .object(o)
    }
}

/// CPU time and resident memory of a process on this machine, from /proc.
struct ProcessCPU {
    let cpuSeconds: Double
    let rssBytes: Int

    static func sample(_ pid: Int32?) -> ProcessCPU? {
        guard let pid, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var rss = 0
        if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        {
            rss = (Int(line.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "") ?? 0) * 1024
        }
        return ProcessCPU(cpuSeconds: (user + system) / max(ticks, 1), rssBytes: rss)
    }
}

/// SplitMix64, to draw usernameless sign-ins repeatably per worker.
struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// HTTP for the load test: plain HTTP/1.1 over SwiftNIO, one kept-alive connection per
/// browser (URLSession on Linux cost more CPU per request than the server under test).
final class LoadClient: Sendable {
    let host: String
    let port: Int
    let hostHeader: String

    init(base: String) throws {
        guard let url = URL(string: base), url.scheme == "http", let host = url.host else {
            throw LoadTestError("--url must be http://HOST[:PORT] (the load test speaks plain HTTP)")
        }
        self.host = host
        self.port = url.port ?? 80
        self.hostHeader = url.port.map { "\(host):\($0)" } ?? host
    }

    struct Reply {
        let status: Int
        let json: JSONValue
        var ok: Bool { status == 200 && json["status"]?.stringValue == "ok" }
        var message: String { json["errorMessage"]?.stringValue ?? "" }
    }

    /// Runs `body` with a browser: its own connection and cookies, one request at a time.
    func withBrowser<T: Sendable>(_ body: (Browser) async throws -> T) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            let browser = Browser(client: self, inbound: inbound.makeAsyncIterator(), outbound: outbound)
            return try await body(browser)
        }
    }

    /// The server closed the connection after an answer that said so (`Connection: close`).
    struct ServerClosed: Error {}

    /// A browser: one connection, its cookies.
    final class Browser {
        let client: LoadClient
        var inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
        let outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>
        var cookies: [String: String] = [:]
        /// The last answer said `Connection: close`: the next request needs a new connection.
        var serverClosing = false

        init(
            client: LoadClient, inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator,
            outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>
        ) {
            self.client = client
            self.inbound = inbound
            self.outbound = outbound
        }

        func post(_ path: String, _ body: JSONObject) async throws -> Reply {
            try await post(bytes: path, JSONValue.object(body).serializedBytes())
        }

        func post(bytes path: String, _ body: [UInt8]) async throws -> Reply {
            if serverClosing { throw ServerClosed() }
            var headers = HTTPHeaders()
            headers.add(name: "Host", value: client.hostHeader)
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(body.count))
            if !cookies.isEmpty { headers.add(name: "Cookie", value: cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")) }
            try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: path, headers: headers)))
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
            try await outbound.write(.end(nil))
            var status = 0
            var data = ByteBuffer()
            loop: while true {
                guard let part = try await inbound.next() else { throw LoadTestError("the server closed the connection") }
                switch part {
                case .head(let head):
                    status = Int(head.status.code)
                    serverClosing = !head.isKeepAlive
                    for set in head.headers["Set-Cookie"] {
                        guard let pair = set.split(separator: ";").first else { continue }
                        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                        guard parts.count == 2 else { continue }
                        // An empty value or Max-Age=0 ends the cookie, as a browser would.
                        if parts[1].isEmpty || set.lowercased().contains("max-age=0") {
                            cookies.removeValue(forKey: parts[0])
                        } else {
                            cookies[parts[0]] = parts[1]
                        }
                    }
                case .body(var chunk):
                    guard data.readableBytes + chunk.readableBytes <= 1 << 20 else { throw LoadTestError("an answer over 1 MiB") }
                    data.writeBuffer(&chunk)
                case .end:
                    break loop
                }
            }
            return Reply(status: status, json: (try? JSONValue.parse(Array(data.readableBytesView))) ?? .null)
        }
    }
}
