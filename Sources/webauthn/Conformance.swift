import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(Testing) import WebAuthnCore
import WebAuthnTesting

/// `webauthn conformance`: drives any relying party that speaks the FIDO2
/// server conformance API with a software authenticator, case by case.
struct Conformance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the FIDO2 server conformance cases against a relying party over its conformance API.")

    @Option(parsing: .unconditional, help: "The server under test, e.g. http://127.0.0.1:8080.") var url: String
    @Option(name: .customLong("rp-id"), parsing: .unconditional, help: "The server's RP ID.") var rpId: String
    @Option(parsing: .unconditional, help: "The origin the authenticator claims.") var origin: String
    @Option(name: .customLong("metadata-out"), parsing: .unconditional, help: "Folder for the metadata statements of the runner's test authenticators.")
    var metadataOut: String
    @Flag(name: .customLong("write-metadata-only"), help: "Write the metadata statements and stop.") var writeMetadataOnly = false
    @Option(parsing: .unconditional, help: "Run only the cases whose id contains this text.") var only: String?
    @Option(parsing: .unconditional, help: "Write a per-case JSON report here.") var json: String?
    @Flag(help: "After each passing F case, print the server's refusal (its status and errorMessage).") var verbose = false

    func validate() throws {
        guard URL(string: url)?.host != nil else { throw ValidationError("--url is not a URL") }
    }

    func run() async throws {
        let pki = try ConformancePKI.load(folder: metadataOut)
        if writeMetadataOnly {
            print("metadata in \(metadataOut): " + (ConformancePKI.statements(pki.authority).map(\.0) + ["mds/ (BLOBs, mds-root.pem, CRLs)"]).joined(separator: ", "))
            return
        }
        let runner = ConformanceRunner(base: url, rpId: rpId, origin: origin, pki: pki)
        var passed = 0, failed = 0
        var report: [JSONValue] = []
        let offered = await runner.offeredAlgorithms()
        for testCase in ConformanceCases.all(runner, offered: offered) where only.map({ testCase.id.contains($0) }) ?? true {
            let outcome: String?
            let refusals = RefusalLog()
            do {
                try await RefusalLog.$current.withValue(refusals) { try await testCase.run() }
                outcome = nil
            } catch {
                outcome = "\(error)"
            }
            let refusal = testCase.id.contains(" F-") ? refusals.last : nil
            if let outcome {
                failed += 1
                print("FAIL \(testCase.id): \(outcome)")
            } else {
                passed += 1
                print("PASS \(testCase.id)" + (verbose ? refusal.map { " (refused: \($0))" } ?? "" : ""))
            }
            report.append(["id": .string(testCase.id), "intent": .string(testCase.intent), "passed": .bool(outcome == nil),
                           "reason": outcome.map { .string($0) } ?? .null, "serverRefusal": refusal.map { .string($0) } ?? .null])
        }
        print("\(passed) passed, \(failed) failed")
        if let json {
            try Data(JSONValue.object(["passed": .number(Double(passed)), "failed": .number(Double(failed)), "cases": .array(report)]).serializedBytes())
                .write(to: URL(fileURLWithPath: json))
        }
        if failed > 0 { throw ExitCode(1) }
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
            ["aaguid": .string(item.aaguid.description),
             "metadataStatement": authority.metadataStatement(aaguid: item.aaguid, description: "webauthn conformance runner authenticator, \(item.status)"),
             "statusReports": [["status": .string(item.status), "effectiveDate": "2024-01-01"]]]
        }
        return ["no": 1, "entries": .array(entries)]
    }

    /// The metadata the runner writes for the server under test: its packed
    /// authenticator (full attestation), a self-attestation-only authenticator
    /// (`basic_surrogate`, for Resp-4 and Resp-6), its U2F key, and the
    /// status payload.
    static func statements(_ authority: AttestationAuthority) -> [(String, JSONValue)] {
        [
            ("runner-packed.json", authority.metadataStatement(aaguid: aaguid, description: "webauthn conformance runner authenticator",
                                                               attestationTypes: ["basic_full", "attca", "anonca"])),
            ("runner-self.json", authority.metadataStatement(aaguid: selfAAGUID, description: "webauthn conformance runner self-attestation authenticator",
                                                             attestationTypes: ["basic_surrogate"])),
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
           let root = FileManager.default.contents(atPath: path("runner-root.cert.der")) {
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

enum PackedAttestationOID { static let aaguid = "1.3.6.1.4.1.45724.1.1.4" }
