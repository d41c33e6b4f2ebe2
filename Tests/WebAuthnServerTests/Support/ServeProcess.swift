import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import WebAuthnCore
import WebAuthnMetadata
import WebAuthnConformance
import _WebAuthnEncoding
import _WebAuthnCrypto

/// A `webauthn serve` process on a loopback port, for tests over real HTTP.
final class ServeProcess: @unchecked Sendable {
    static let binary: URL = {
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("webauthn")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/webauthn")
    }()

    static let rpId = "example.com"
    static let origin = "https://example.com"

    let process = Process()
    let output = Pipe()
    private(set) var port = 0
    let database: String
    /// The server's standard error (its log), in a file so that it never blocks the server.
    let errorLog = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString).log")
    var log: String { (try? String(contentsOf: errorLog, encoding: .utf8)) ?? "" }

    /// Whether the log comes to contain `needle` within `seconds`: a line is written after the
    /// response has gone out, and a loaded machine (CI's) may take well over the 200 ms the tests
    /// used to sleep before reading it once.
    func logEventually(contains needle: String, within seconds: Double = 15) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if log.contains(needle) { return true }
            if Date() >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The secret every test server shares (as instances behind one load balancer must).
    static let secretFile: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("serve-secret-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(Base64URL.encode(SecureRandom.bytes(32)).utf8), attributes: [.posixPermissions: 0o600])
        return path
    }()

    /// Starts `serve` on a free port with a SQLite database at `database`.
    ///
    /// Async, and it waits without blocking: Swift Testing runs the tests on the cooperative
    /// pool (two threads here), and a start that slept on one of them stalled every other test
    /// of the process, which on a loaded CI machine made timed checks elsewhere fail.
    init(database: String, extra: [String] = [], logLevel: String = "warning", sharedSecret: Bool = true) async throws {
        self.database = database
        process.executableURL = Self.binary
        process.arguments =
            [
                "serve", "--port", "0", "--rp-id", Self.rpId, "--origin", Self.origin, "--db", database.contains("://") ? database : "sqlite:" + database,
                "--log-level", logLevel,
            ] + (sharedSecret ? ["--secret-file", Self.secretFile] : []) + extra
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: errorLog.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: errorLog)
        try process.run()
        // The one line saying where it listens carries the port; the pipe is read without blocking.
        let fd = output.fileHandleForReading.fileDescriptor
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(60)
        while port == 0 && Date() < deadline && process.isRunning {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 {
                try await Task.sleep(for: .milliseconds(20))
                continue
            }
            text += String(decoding: buffer.prefix(count), as: UTF8.self)
            if let range = text.range(of: #"127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                port = Int(text[range].split(separator: ":")[1]) ?? 0
            }
        }
        guard port != 0 else {
            process.terminate()
            throw WebAuthnError(.storageFailure, "serve did not start: \(text)")
        }
    }

    func stop() {
        guard process.isRunning else { return }
        process.interrupt()
        process.waitUntilExit()
    }

    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { process.terminate() }
        try? FileManager.default.removeItem(at: errorLog)
    }

    struct Reply {
        let status: Int
        let json: JSONValue
        let cookie: String?
        let headers: [String: String]
        var ok: Bool { json["status"]?.stringValue == "ok" }
        var errorMessage: String { json["errorMessage"]?.stringValue ?? "" }
    }

    /// POSTs (or GETs, with no body) JSON; cookies are passed by hand.
    func request(
        _ path: String, _ body: JSONValue? = nil, cookie: String? = nil, method: String? = nil, raw: [UInt8]? = nil,
        contentType: String = "application/json", headers: [String: String] = [:]
    ) async throws -> Reply {
        try await Self.request(
            port: port, path, body, cookie: cookie, method: method, raw: raw, contentType: contentType, headers: headers)
    }

    /// The same, to any server on this host (one in the test's own process).
    static func request(
        port: Int, _ path: String, _ body: JSONValue? = nil, cookie: String? = nil, method: String? = nil, raw: [UInt8]? = nil,
        contentType: String = "application/json", headers: [String: String] = [:]
    ) async throws -> Reply {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method ?? (body == nil && raw == nil ? "GET" : "POST")
        if let raw { request.httpBody = Data(raw) } else if let body { request.httpBody = Data(body.serializedBytes()) }
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        let session = URLSession(configuration: configuration)
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        let setCookie = (http.value(forHTTPHeaderField: "Set-Cookie")).flatMap { $0.split(separator: ";").first.map(String.init) }
        // A server answer may be larger than a client request may (an account with many credentials).
        let json = (try? JSONValue.parse([UInt8](data), limits: JSONLimits(maxBytes: 1 << 20))) ?? .string(String(decoding: data, as: UTF8.self))
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { if let n = name as? String, let v = value as? String { fields[n.lowercased()] = v } }
        return Reply(status: http.statusCode, json: json, cookie: setCookie, headers: fields)
    }

    static func temporaryDatabase() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString).sqlite").path
    }
}
