internal import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The FIDO2 server conformance cases, run with a software authenticator
/// against any relying party that speaks the conformance API
/// (`/attestation/options`, `/attestation/result`, `/assertion/options`,
/// `/assertion/result`). `webauthn-dev conformance` is a thin command over this.
public enum ConformanceSuite {
    /// Where and how to run.
    public struct Options: Sendable {
        /// The server under test, e.g. `http://127.0.0.1:8080`.
        public var url: String
        /// The RP ID the authenticator scopes its credentials to.
        public var rpId: String
        /// The origin the authenticator claims.
        public var origin: String
        /// The folder for the runner's PKI and the metadata statements the server under test must load.
        public var metadataFolder: String
        /// Run only the cases whose id contains this text.
        public var only: String?

        /// Options; each parameter sets the property of the same name (`only` nil: every case).
        public init(url: String, rpId: String, origin: String, metadataFolder: String, only: String? = nil) {
            self.url = url
            self.rpId = rpId
            self.origin = origin
            self.metadataFolder = metadataFolder
            self.only = only
        }
    }

    /// One case's outcome.
    public struct CaseResult: Sendable {
        /// Such as `Server-ServerAuthenticatorAttestationResponse-Resp-1 P-1`.
        public let id: String
        /// What the case checks, as the conformance tools word it.
        public let intent: String
        /// Whether the server behaved as the case expects (for an F case: it refused).
        public let passed: Bool
        /// Why the case failed.
        public let reason: String?
        /// For a passing F case: the server's refusal (its status and errorMessage).
        public let serverRefusal: String?
    }

    /// A whole run.
    public struct Report: Sendable {
        /// Every case run, in order.
        public let cases: [CaseResult]
        /// The number of cases that passed.
        public var passed: Int { cases.filter(\.passed).count }
        /// The number of cases that failed.
        public var failed: Int { cases.count - passed }

        /// The report as JSON (`passed`, `failed`, `cases`).
        public var jsonBytes: [UInt8] {
            let list: [JSONValue] = cases.map { c in
                [
                    "id": .string(c.id), "intent": .string(c.intent), "passed": .bool(c.passed),
                    "reason": c.reason.map { .string($0) } ?? .null, "serverRefusal": c.serverRefusal.map { .string($0) } ?? .null,
                ]
            }
            return JSONValue.object(["passed": .number(Double(passed)), "failed": .number(Double(failed)), "cases": .array(list)]).serializedBytes()
        }
    }

    /// Creates (on first use) the runner's PKI in `folder` and writes the metadata
    /// the server under test must load. Returns the names written or present.
    @discardableResult
    public static func prepareMetadata(folder: String) throws -> [String] {
        let pki = try ConformancePKI.load(folder: folder)
        return ConformancePKI.statements(pki.authority).map(\.0) + ["mds/ (BLOBs, mds-root.pem, CRLs)"]
    }

    /// Runs every case (or those matching `options.only`) in order; `progress` sees each result as it comes.
    public static func run(_ options: Options, progress: @Sendable (CaseResult) -> Void = { _ in }) async throws -> Report {
        let pki = try ConformancePKI.load(folder: options.metadataFolder)
        let runner = ConformanceRunner(base: options.url, rpId: options.rpId, origin: options.origin, pki: pki)
        let offered = await runner.offeredAlgorithms()
        var results: [CaseResult] = []
        for testCase in ConformanceCases.all(runner, offered: offered) where options.only.map({ testCase.id.contains($0) }) ?? true {
            let outcome: String?
            let refusals = RefusalLog()
            do {
                try await RefusalLog.$current.withValue(refusals) { try await testCase.run() }
                outcome = nil
            } catch {
                outcome = "\(error)"
            }
            let result = CaseResult(
                id: testCase.id, intent: testCase.intent, passed: outcome == nil, reason: outcome,
                serverRefusal: testCase.id.contains(" F-") ? refusals.last : nil)
            progress(result)
            results.append(result)
        }
        return Report(cases: results)
    }
}

/// The runner's own test PKI, persisted in the metadata folder so that the
/// statements a server loaded and the runner's keys agree across runs: a
/// root and one attestation key (an `AttestationAuthority`), and the
/// metadata statements naming the runner's authenticators.
struct ConformancePKI: Sendable {
    static let aaguid = AAGUID("7d1351a6-e097-4852-b8bf-c9ac5c9ce4a3")!
    /// The authenticator whose metadata lists self (surrogate) attestation only.
    static let selfAAGUID = AAGUID("7d1351a6-e097-4852-b8bf-c9ac5c9ce4a5")!
    let authority: AttestationAuthority

    /// Authenticators whose metadata carries a status report (MDS3 §3.1.4),
    /// each with its own AAGUID; the first five are compromise statuses.
    static let statusAuthenticators: [(status: String, aaguid: AAGUID)] = [
        "REVOKED", "USER_VERIFICATION_BYPASS", "ATTESTATION_KEY_COMPROMISE", "USER_KEY_REMOTE_COMPROMISE",
        "USER_KEY_PHYSICAL_COMPROMISE", "FIDO_CERTIFIED_L1", "UPDATE_AVAILABLE",
    ].enumerated().map { i, status in (status, AAGUID("7d1351a6-e097-4852-b8bf-c9ac5c9ce5\(String(format: "%02x", i))")!) }

    /// A decoded BLOB payload with one entry per status authenticator.
    static func statusPayload(_ authority: AttestationAuthority) -> JSONValue {
        let entries: [JSONValue] = statusAuthenticators.map { item in
            [
                "aaguid": .string(item.aaguid.description),
                "metadataStatement": authority.metadataStatement(aaguid: item.aaguid, description: "webauthn conformance runner authenticator, \(item.status)"),
                "statusReports": [["status": .string(item.status), "effectiveDate": "2024-01-01"]],
            ]
        }
        return ["no": 1, "entries": .array(entries)]
    }

    /// The metadata the runner writes for the server under test: its packed
    /// authenticator (full attestation), a self-attestation-only authenticator
    /// (`basic_surrogate`, for Resp-4 and Resp-6), its U2F key, and the
    /// status payload.
    static func statements(_ authority: AttestationAuthority) -> [(String, JSONValue)] {
        [
            (
                "runner-packed.json",
                authority.metadataStatement(
                    aaguid: aaguid, description: "webauthn conformance runner authenticator",
                    attestationTypes: ["basic_full", "attca", "anonca"])
            ),
            (
                "runner-self.json",
                authority.metadataStatement(
                    aaguid: selfAAGUID, description: "webauthn conformance runner self-attestation authenticator",
                    attestationTypes: ["basic_surrogate"])
            ),
            ("runner-status.json", statusPayload(authority)),
            ("runner-u2f.json", authority.metadataStatement(aaguid: nil, description: "webauthn conformance runner U2F authenticator")),
        ]
    }

    /// Loads the runner's PKI from `folder`, creating it on first use, and
    /// writes whichever metadata files the folder lacks.
    static func load(folder: String) throws -> ConformancePKI {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        func path(_ name: String) -> String { (folder as NSString).appendingPathComponent(name) }
        let authority: AttestationAuthority
        if let rootKey = try? String(contentsOfFile: path("runner-root.key.pem"), encoding: .utf8),
            let attestationKey = try? String(contentsOfFile: path("runner-attestation.key.pem"), encoding: .utf8),
            let root = FileManager.default.contents(atPath: path("runner-root.cert.der"))
        {
            authority = try AttestationAuthority(rootKeyPEM: rootKey, rootCertificateDER: [UInt8](root), attestationKeyPEM: attestationKey)
        } else {
            authority = try AttestationAuthority.generate(name: "webauthn conformance runner")
            try authority.rootKeyPEM.write(toFile: path("runner-root.key.pem"), atomically: true, encoding: .utf8)
            try authority.attestationKeyPEM.write(toFile: path("runner-attestation.key.pem"), atomically: true, encoding: .utf8)
            try Data(authority.root.der).write(to: URL(fileURLWithPath: path("runner-root.cert.der")))
        }
        for (name, statement) in statements(authority) where !FileManager.default.fileExists(atPath: path(name)) {
            try Data(statement.serializedBytes()).write(to: URL(fileURLWithPath: path(name)))
        }
        if !FileManager.default.fileExists(atPath: path("mds")) { try ConformanceMDS.write(folder: path("mds"), authority: authority) }
        return ConformancePKI(authority: authority)
    }
}
