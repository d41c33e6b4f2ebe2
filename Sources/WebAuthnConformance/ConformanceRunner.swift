internal import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Why a case failed, with the server's errorMessage where there was one.
struct CaseFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw CaseFailure(message()) }
}

/// One conformance case.
struct ConformanceCase: Sendable {
    let id: String
    let intent: String
    let run: @Sendable () async throws -> Void
}

/// The last refusal (errorMessage of a failed reply) the server gave during a case,
/// so that a passing F case can show why the server refused.
final class RefusalLog: @unchecked Sendable {
    private let lock = NSLock()
    private var message: String?
    @TaskLocal static var current: RefusalLog?

    func record(_ text: String) { lock.withLock { message = text } }
    var last: String? { lock.withLock { message } }
}

/// Talks to the server under test like a browser would (one cookie jar per client).
final class ConformanceRunner: Sendable {
    let base: String
    let rpId: String
    let origin: String
    let pki: ConformancePKI

    init(base: String, rpId: String, origin: String, pki: ConformancePKI) {
        self.base = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.rpId = rpId
        self.origin = origin
        self.pki = pki
    }

    struct Reply: Sendable {
        let status: Int
        let json: JSONValue
        var ok: Bool { json["status"]?.stringValue == "ok" && status == 200 }
        var message: String { json["errorMessage"]?.stringValue ?? json.serialized() }
        /// A conformant failure: status failed, a 4xx code, a non-empty errorMessage.
        var failedProperly: Bool {
            json["status"]?.stringValue == "failed" && (400..<500).contains(status) && !(json["errorMessage"]?.stringValue ?? "").isEmpty
        }
        subscript(key: String) -> JSONValue? { json[key] }
    }

    /// A browser: it keeps the cookies the server sets.
    final class Client: @unchecked Sendable {
        let runner: ConformanceRunner
        private let lock = NSLock()
        private var cookies: [String: String] = [:]

        init(_ runner: ConformanceRunner) { self.runner = runner }

        func post(_ path: String, _ body: JSONValue) async throws -> Reply {
            var request = URLRequest(url: URL(string: runner.base + path)!)
            request.httpMethod = "POST"
            request.httpBody = Data(body.serializedBytes())
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            let cookieHeader = lock.withLock { cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
            if !cookieHeader.isEmpty { request.setValue(cookieHeader, forHTTPHeaderField: "Cookie") }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpShouldSetCookies = false
            configuration.timeoutIntervalForRequest = 30
            let (data, response) = try await URLSession(configuration: configuration).data(for: request)
            let http = response as! HTTPURLResponse
            if let set = http.value(forHTTPHeaderField: "Set-Cookie"), let pair = set.split(separator: ";").first {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { lock.withLock { cookies[parts[0]] = parts[1] } }
            }
            let json = (try? JSONValue.parse([UInt8](data))) ?? .string(String(decoding: data, as: UTF8.self))
            let reply = Reply(status: http.statusCode, json: json)
            if !reply.ok { RefusalLog.current?.record("\(reply.status) \(reply.message)") }
            return reply
        }
    }

    func client() -> Client { Client(self) }

    func uniqueName(_ prefix: String) -> String { "\(prefix)-\(Base64URL.encode(SecureRandom.bytes(6)))" }

    /// Asks for creation options and answers them with `authenticator`, after `edit`.
    func register(
        _ client: Client, username: String, authenticator: SoftwareAuthenticator, algorithm: COSEAlgorithm = .es256,
        attestation: SoftwareAuthenticator.Attestation = .none, options extra: JSONObject = [:],
        defect: SoftwareAuthenticator.StatementDefect? = nil, credentialIdLength: Int = 32,
        edit: (inout RegistrationParts) throws -> Void = { _ in },
        json jsonEdit: (inout JSONObject) -> Void = { _ in }
    ) async throws -> (Reply, RegistrationParts) {
        var body: JSONObject = ["username": .string(username), "displayName": .string(username), "attestation": "direct"]
        for m in extra.members { body[m.key] = m.value }
        let options = try await client.post("/attestation/options", .object(body))
        try check(options.ok, "attestation/options failed: \(options.message)")
        guard let challenge = options["challenge"]?.stringValue.flatMap(Base64URL.decode),
            let user = options["user"]?["id"]?.stringValue.flatMap(Base64URL.decode)
        else {
            throw CaseFailure("attestation/options has no base64url challenge or user.id")
        }
        var parts = try authenticator.register(
            rpId: rpId, origin: origin, challenge: challenge, userHandle: user,
            algorithm: algorithm, attestation: attestation, credentialIdLength: credentialIdLength)
        try edit(&parts)
        if let defect { try authenticator.restate(&parts, attestation, defect: defect) }
        var object = parts.conformanceJSON.objectValue!
        jsonEdit(&object)
        return (try await client.post("/attestation/result", .object(object)), parts)
    }

    /// Asks for request options and answers them, after `edit` (re-signed unless `resign` is false).
    func signIn(
        _ client: Client, username: String?, authenticator: SoftwareAuthenticator, credential: [UInt8],
        resign: Bool = true, userVerification: String? = nil, edit: (inout AssertionParts) throws -> Void = { _ in },
        json jsonEdit: (inout JSONObject) -> Void = { _ in }
    ) async throws -> (Reply, AssertionParts) {
        var request: JSONObject = [:]
        if let username { request["username"] = .string(username) }
        if let userVerification { request["userVerification"] = .string(userVerification) }
        let options = try await client.post("/assertion/options", .object(request))
        try check(options.ok, "assertion/options failed: \(options.message)")
        guard let challenge = options["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
            throw CaseFailure("assertion/options has no base64url challenge")
        }
        var parts = try authenticator.authenticate(rpId: rpId, origin: origin, challenge: challenge, credentialId: credential)
        try edit(&parts)
        if resign { parts = try authenticator.resign(parts) }
        var object = parts.conformanceJSON.objectValue!
        jsonEdit(&object)
        return (try await client.post("/assertion/result", .object(object)), parts)
    }

    /// The algorithms the server offers in pubKeyCredParams (empty if it cannot be asked).
    func offeredAlgorithms() async -> Set<Int> {
        let o = try? await client().post("/attestation/options", ["username": .string(uniqueName("algs")), "displayName": "algorithms"])
        return Set(o?["pubKeyCredParams"]?.arrayValue?.compactMap { $0["alg"]?.intValue } ?? [])
    }

    /// A security key with `aaguid` (default: the runner's), whose attestation chains to the runner's root.
    func securityKey(aaguid: AAGUID = ConformancePKI.aaguid) -> SoftwareAuthenticator {
        var profile = SoftwareAuthenticator.Profile.securityKey
        profile.aaguid = aaguid.bytes
        return SoftwareAuthenticator(profile: profile)
    }

    var packedFull: SoftwareAuthenticator.Attestation { .packedFull(pki.authority) }
}
