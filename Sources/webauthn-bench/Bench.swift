import ArgumentParser
import Foundation
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Single-threaded throughput of whole ceremonies from the JSON request body,
/// next to raw OpenSSL in the same run (see Docs/Benchmark.md). Every ratio
/// compares measurements taken in alternation, under the same machine state.
///
/// Each engine measurement alternates short rounds with its OpenSSL floor, so
/// both see the same machine; the ratio of the two is what to compare across
/// machines. The contract names re-submit one request whose challenge is
/// re-issued inside the timed loop (like the floor and `openssl speed`, which
/// verify one signature repeatedly); the `-distinct` variants verify a fresh
/// assertion every time.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webauthn-bench",
        abstract: "Measure verification throughput against raw OpenSSL (ratios, not absolute times, are what to compare).")

    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: "Seconds per measurement.") var seconds: Double = 2
    @Option(help: "Run only the measurements whose name contains this text.") var only: String?
    @Flag(name: .customLong("no-openssl-speed"), help: "Skip running `openssl speed` for the reference rates.")
    var noOpenSSLSpeed = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be in (0, 600]") }
    }

    struct Result: Sendable {
        let name: String
        let opsPerSecond: Double
    }

    func run() async throws {
        // Keep the work off the main actor: run in a detached task.
        let (seconds, skipSpeed, only) = (self.seconds, noOpenSSLSpeed, self.only)
        let (results, ratios) = try await Task.detached {
            try await Self.measureAll(seconds: seconds, openSSLSpeed: !skipSpeed, only: only)
        }.value
        if json {
            let summary: JSONValue = [
                "results": .array(results.map { ["name": .string($0.name), "opsPerSecond": .number($0.opsPerSecond.rounded())] }),
                "ratios": .object(ratios),
            ]
            print(summary.serialized())
        } else {
            for r in results { print(r.name.padding(toLength: 36, withPad: " ", startingAt: 0) + String(format: "%12.0f ops/s", r.opsPerSecond)) }
            for m in ratios.members { print("ratio \(m.key): \(m.value.serialized())") }
        }
    }

    static func measureAll(seconds: Double, openSSLSpeed: Bool, only: String?) async throws -> ([Result], JSONObject) {
        var results: [Result] = []
        var ratios = JSONObject()
        func wanted(_ name: String) -> Bool { only.map { name.contains($0) } ?? true }
        func ratio(_ key: String, _ value: Double) { ratios[key] = .number((value * 1000).rounded() / 1000) }

        for (name, alg, floorName) in [
            ("es256-authentication", COSEAlgorithm.es256, "openssl-p256-verify"),
            ("eddsa-authentication", .edDSA, "openssl-ed25519-verify"),
            ("rs256-authentication", .rs256, "openssl-rsa2048-verify"),
        ] where wanted(name) {
            let floor = try RawVerifier(alg)
            let prepared = try PreparedVerifier(alg)
            let same = try await Fixture.sameRequest(alg)
            let (engineRate, floorRate) = try await paired(seconds: seconds, engine: same, floor: { floor.verifyOnce() })
            results.append(Result(name: name, opsPerSecond: engineRate))
            results.append(Result(name: floorName, opsPerSecond: floorRate))
            ratio("\(name)/\(floorName)", engineRate / floorRate)
            let (engineRate2, preparedRate) = try await paired(seconds: seconds, engine: same, floor: { prepared.verifyOnce() })
            results.append(Result(name: floorName + "-prepared", opsPerSecond: preparedRate))
            ratio("\(name)/\(floorName)-prepared", engineRate2 / preparedRate)
            let distinct = try await Fixture.distinctRequests(alg)
            let (distinctRate, floorRate2) = try await paired(seconds: seconds, engine: distinct, floor: { floor.verifyOnce() })
            results.append(Result(name: name + "-distinct", opsPerSecond: distinctRate))
            ratio("\(name)-distinct/\(floorName)", distinctRate / floorRate2)
        }
        if wanted("es256-packed-registration") {
            let floor = try RawVerifier(.es256)
            let (rate, floorRate) = try await paired(seconds: seconds, engine: try await Fixture.registrations(), floor: { floor.verifyOnce() })
            results.append(Result(name: "es256-packed-registration", opsPerSecond: rate))
            ratio("es256-packed-registration/openssl-p256-verify", rate / floorRate)
        }
        if wanted("server-routes-sqlite") {
            // Sign-ins per CPU second of the server's routes and store, without HTTP, between two
            // measurements of the engine alone (single-threaded, so its rate is per CPU second too).
            let routes = try await ServerRoutesFixture.make()
            let floor = try RawVerifier(.es256)
            let engine = try await Fixture.sameRequest(.es256)
            do {
                let (engineBefore, floorBefore) = try await paired(seconds: seconds / 2, engine: engine, floor: { floor.verifyOnce() })
                let (_, serverCPU) = try await routes.measure(seconds: seconds)
                let (engineAfter, floorAfter) = try await paired(seconds: seconds / 2, engine: engine, floor: { floor.verifyOnce() })
                let rate = 1 / serverCPU
                results.append(Result(name: "server-routes-sqlite", opsPerSecond: rate))
                ratio("server-routes-sqlite/es256-authentication", rate / ((engineBefore + engineAfter) / 2))
                ratio("server-routes-sqlite/openssl-p256-verify", rate / ((floorBefore + floorAfter) / 2))
            } catch {
                await routes.close()
                throw error
            }
            await routes.close()
        }
        if openSSLSpeed {
            // `openssl speed` runs in its own process; to compare under the same
            // machine state, its short runs alternate with engine rounds.
            for (name, algorithm, engineName, alg) in [
                ("openssl-speed-ecdsap256-verify", "ecdsap256", "es256-authentication", COSEAlgorithm.es256),
                ("openssl-speed-ed25519-verify", "ed25519", "eddsa-authentication", .edDSA),
                ("openssl-speed-rsa2048-verify", "rsa2048", "rs256-authentication", .rs256),
            ]
            where wanted(engineName) {
                let engine = try await Fixture.sameRequest(alg)
                var engineOps = 0
                var engineNanos: UInt64 = 0
                var speeds: [Double] = []
                for _ in 0..<max(2, Int(seconds.rounded())) {
                    let start = engineNanos
                    while engineNanos - start < 1_000_000_000 { engineOps += try await engine.timedRound(&engineNanos) }
                    if let speed = opensslSpeed(algorithm, seconds: 1) { speeds.append(speed) }
                }
                guard !speeds.isEmpty else { continue }
                let speed = speeds.reduce(0, +) / Double(speeds.count)
                let engineRate = Double(engineOps) / (Double(engineNanos) / 1e9)
                results.append(Result(name: name, opsPerSecond: speed))
                ratio("\(engineName)/\(name)", engineRate / speed)
            }
        }
        return (results, ratios)
    }

    /// Alternates rounds of the engine and its floor for about `seconds`
    /// each; returns both rates.
    static func paired(seconds: Double, engine: Fixture, floor: () -> Bool) async throws -> (Double, Double) {
        var engineOps = 0, floorOps = 0
        var engineNanos: UInt64 = 0, floorNanos: UInt64 = 0
        try await engine.run(64)  // warm up
        while Double(engineNanos) / 1e9 < seconds {
            engineOps += try await engine.timedRound(&engineNanos)
            let start = DispatchTime.now().uptimeNanoseconds
            var n = 0
            while DispatchTime.now().uptimeNanoseconds - start < 50_000_000 {
                for _ in 0..<32 where floor() { n += 1 }
            }
            floorNanos += DispatchTime.now().uptimeNanoseconds - start
            floorOps += n
        }
        return (Double(engineOps) / (Double(engineNanos) / 1e9), Double(floorOps) / (Double(floorNanos) / 1e9))
    }

    /// Runs `openssl speed -seconds N ALG` and reads its verify/s column.
    /// `openssl speed` times itself with SIGALRM, and Foundation's `Process`
    /// passes on the parent's blocked signals, so the child is spawned here
    /// with an empty signal mask.
    static func opensslSpeed(_ algorithm: String, seconds: Int) -> Double? {
        let output = spawnCapturingOutput(["openssl", "speed", "-seconds", String(seconds), algorithm])
        let lines = output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        // A header like "sign verify sign/s verify/s"; the data row follows it.
        for (i, header) in lines.enumerated() where header.contains("verify/s") && i + 1 < lines.count {
            let row = lines[i + 1]
            let offset = header.count - header.firstIndex(of: "verify/s")!
            guard row.count >= offset, let v = Double(row[row.count - offset]) else { continue }
            return v
        }
        return nil
    }

    static func spawnCapturingOutput(_ arguments: [String]) -> String {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return "" }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGALRM)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, environ)
        close(fds[1])
        defer { close(fds[0]) }
        guard rc == 0 else { return "" }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fds[0], &buffer, buffer.count)
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return String(decoding: data, as: UTF8.self)
    }
}

/// A prepared workload: untimed preparation, timed engine calls.
final class Fixture: @unchecked Sendable {
    static let origin = "https://example.com"
    static let rp = try! RelyingParty(
        id: "example.com", origins: [origin],
        policy: VerificationPolicy(algorithms: [.es256, .edDSA, .rs256]))

    private let prepare: () async throws -> [[UInt8]]
    private let operation: ([UInt8]) async throws -> Void

    init(prepare: @escaping () async throws -> [[UInt8]], operation: @escaping ([UInt8]) async throws -> Void) {
        self.prepare = prepare
        self.operation = operation
    }

    func run(_ count: Int) async throws {
        var done = 0
        while done < count {
            for body in try await prepare() { try await operation(body); done += 1 }
        }
    }

    /// One round of about 50 ms of engine calls; returns how many ran.
    func timedRound(_ nanos: inout UInt64) async throws -> Int {
        var count = 0
        var spent: UInt64 = 0
        while spent < 50_000_000 {
            let bodies = try await prepare()
            let start = DispatchTime.now().uptimeNanoseconds
            for body in bodies { try await operation(body) }
            spent += DispatchTime.now().uptimeNanoseconds - start
            count += bodies.count
        }
        nanos += spent
        return count
    }

    /// An engine with one credential of `profile` registered for a new user.
    static func registeredCredential(
        _ alg: COSEAlgorithm, profile: SoftwareAuthenticator.Profile
    ) async throws -> (WebAuthnEngine, SoftwareAuthenticator, UserEntity, [UInt8]) {
        let engine = WebAuthnEngine(relyingParty: rp)
        let authenticator = SoftwareAuthenticator(profile: profile)
        let user = UserEntity.new(name: "bench")
        let creation = try await engine.startRegistration(user: user)
        let registration = try authenticator.register(
            rpId: rp.id, origin: origin, challenge: creation.challenge,
            userHandle: user.id, algorithm: alg)
        let id = try await engine.finishRegistration(json: registration.jsonBytes).credential.id
        return (engine, authenticator, user, id)
    }

    /// One registered credential (of a synced passkey, counter 0) and one
    /// assertion, submitted again and again: the timed operation re-issues
    /// the challenge (the store insert is timed too) and finishes the ceremony.
    static func sameRequest(_ alg: COSEAlgorithm) async throws -> Fixture {
        let (engine, authenticator, user, id) = try await registeredCredential(alg, profile: .platformPasskey)
        let request = try await engine.startAuthentication(userHandle: user.id)
        let body = try authenticator.authenticate(rpId: rp.id, origin: origin, challenge: request.challenge, credentialId: id).jsonBytes
        guard let ceremony = try await engine.challenges.pending(challenge: request.challenge) else { throw ExitCode(1) }
        let batch = [[UInt8]](repeating: body, count: 64)
        return Fixture(
            prepare: { batch },
            operation: { body in
                try await engine.challenges.insert(ceremony)
                _ = try await engine.finishAuthentication(json: body)
            })
    }

    /// A security key (rising counter): every operation verifies a fresh assertion.
    static func distinctRequests(_ alg: COSEAlgorithm) async throws -> Fixture {
        let (engine, authenticator, user, id) = try await registeredCredential(alg, profile: .securityKey)
        let batch = alg == .rs256 ? 16 : 128
        return Fixture(
            prepare: {
                var bodies: [[UInt8]] = []
                for _ in 0..<batch {
                    let request = try await engine.startAuthentication(userHandle: user.id)
                    bodies.append(try authenticator.authenticate(rpId: rp.id, origin: origin, challenge: request.challenge, credentialId: id).jsonBytes)
                }
                return bodies
            }, operation: { body in _ = try await engine.finishAuthentication(json: body) })
    }

    /// Packed self-attested ES256 registrations, each of a new credential.
    static func registrations() async throws -> Fixture {
        let engine = WebAuthnEngine(relyingParty: rp)
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        return Fixture(
            prepare: {
                var bodies: [[UInt8]] = []
                for _ in 0..<64 {
                    let user = UserEntity.new(name: "bench")
                    let creation = try await engine.startRegistration(user: user)
                    bodies.append(
                        try authenticator.register(
                            rpId: rp.id, origin: origin, challenge: creation.challenge,
                            userHandle: user.id, algorithm: .es256, attestation: .packedSelf
                        ).jsonBytes)
                }
                return bodies
            }, operation: { body in _ = try await engine.finishRegistration(json: body) })
    }
}
