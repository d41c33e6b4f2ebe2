import Foundation
import Testing
import WebAuthnCore
import WebAuthnMetadata
import WebAuthnConformance
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The conformance suite (in-process) against `webauthn serve`: every case must pass
/// against the project's own server, and the runner must catch a defect.
@Suite("Conformance runner", .serialized)
struct ConformanceRunnerTests {
    /// Runs the suite in-process (the WebAuthnConformance library) and renders
    /// its output as `webauthn-dev conformance` prints it.
    static func runConformance(port: Int, metadata: String) async throws -> (passed: Bool, output: String, report: ConformanceSuite.Report) {
        let report = try await ConformanceSuite.run(
            ConformanceSuite.Options(
                url: "http://127.0.0.1:\(port)", rpId: ServeProcess.rpId, origin: ServeProcess.origin, metadataFolder: metadata))
        var lines = report.cases.map { $0.passed ? "PASS \($0.id)" : "FAIL \($0.id): \($0.reason ?? "")" }
        lines.append("\(report.passed) passed, \(report.failed) failed")
        return (report.failed == 0, lines.joined(separator: "\n") + "\n", report)
    }

    /// The runner's metadata for `serve`: its statements, and its MDS BLOBs with their signing root and CRLs.
    static func metadataFlags(_ folder: String) -> [String] {
        let mds = (folder as NSString).appendingPathComponent("mds")
        return ["--metadata", folder, "--mds-blob", mds, "--metadata-root", (mds as NSString).appendingPathComponent("mds-root.pem"), "--metadata-crl", mds]
    }

    static func metadataFolder() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-\(UUID().uuidString)").path
        try ConformanceSuite.prepareMetadata(folder: folder)
        return folder
    }

    @Test("every case passes against webauthn serve with the runner's metadata and trusted attestation required")
    func allCasesPass() async throws {
        let metadata = try Self.metadataFolder()
        // All algorithms offered, so that the list's OPTIONAL algorithm cases (Resp-4 P-3, P-4, P-6, P-7) run too.
        let server = try await ServeProcess(
            database: ServeProcess.temporaryDatabase(),
            extra: Self.metadataFlags(metadata) + [
                "--conformance", "--require-trusted-attestation", "--algorithms", "ES256,EdDSA,ES384,ES512,PS256,PS384,PS512,RS256,RS384,RS512",
            ])
        // The four BLOBs that must not verify were rejected at start-up, each for its own reason.
        let log = server.log
        for (file, reason) in [
            ("bad-signature", "the BLOB signature"), ("bad-chain", "does not lead to a trusted root"),
            ("revoked-intermediate", "certificate 1 of the chain is revoked"), ("revoked-signer", "the BLOB signing certificate is revoked"),
        ] {
            #expect(
                log.split(separator: "\n").contains { $0.contains("\(file).jwt") && $0.contains(reason) && $0.contains("metadata BLOB rejected") },
                "\(file): \(log)")
        }
        #expect(!log.contains("good.jwt") && !log.contains("bad-report.jwt"))
        defer { server.stop() }
        let (passed, output, run) = try await Self.runConformance(port: server.port, metadata: metadata)
        let failures = output.split(separator: "\n").filter { $0.hasPrefix("FAIL") }
        #expect(passed, "\(failures)")
        #expect(failures.isEmpty)
        let summary = output.split(separator: "\n").last.map(String.init) ?? ""
        #expect(summary.range(of: #"^\d+ passed, 0 failed$"#, options: .regularExpression) != nil, "\(summary)")
        for id in [
            "Resp-4 P-3", "Resp-4 P-4", "Resp-4 P-6", "Resp-4 P-7", "Resp-5 P-1", "Resp-5 P-2", "Resp-7 P-2", "Resp-9 P-2", "Resp-B P-1", "L3-5.8.1 P-1",
            "L3-5.8.1 P-2", "L3-7.1-26 P-1", "L3-8.2 P-1", "L3-8.2.1 P-1", "MDS3-Status P-1", "Server-MDS-1 P-1",
        ] {
            #expect(output.contains("PASS \(id.hasPrefix("Resp") ? "Server-ServerAuthenticatorAttestationResponse-" : "")\(id)\n"), "\(id)")
        }
        // Each F case must be refused for its own rule: the server's error code names it.
        let cases = try JSONValue.parse(run.jsonBytes)["cases"]?.arrayValue ?? []
        func refusal(_ id: String) -> String { cases.first { $0["id"]?.stringValue == id }?["serverRefusal"]?.stringValue ?? "none" }
        let att = "Server-ServerAuthenticatorAttestationResponse", asr = "Server-ServerAuthenticatorAssertionResponse"
        let expected: [(String, String)] = [
            ("\(att)-Resp-2 F-16", "token_binding_invalid"), ("\(att)-Resp-3 F-11", "authenticator_data_malformed"),
            ("\(att)-Resp-3 F-16", "attestation_statement_malformed"), ("\(att)-Resp-5 F-6", "certificate_expired"),
            ("\(att)-Resp-5 F-12", "certificate_expired"), ("\(att)-Resp-5 F-14", "attestation_signature_invalid"),
            ("\(att)-Resp-6 F-2", "attestation_type_not_allowed"), ("\(att)-Resp-9 F-3", "attestation_statement_malformed"),
            ("\(att)-Resp-9 F-4", "attestation_key_mismatch"), ("\(att)-Resp-A F-2", "attestation_key_mismatch"),
            ("\(att)-Resp-B F-1", "attestation_statement_malformed"), ("\(att)-Resp-B F-4", "attestation_statement_malformed"),
            ("\(att)-Resp-B F-6", "attestation_timestamp_invalid"), ("\(att)-Resp-B F-7", "attestation_timestamp_invalid"),
            ("L3-8.2.1 F-5", "attestation_aaguid_mismatch"), ("L3-8.3 F-5", "attestation_key_mismatch"), ("MDS3-Status F-1", "authenticator_compromised"),
            ("Server-MDS-1 F-2", "authenticator_compromised"), ("Server-MDS-1 F-3", "attestation_untrusted"), ("Server-MDS-1 F-6", "attestation_untrusted"),
            ("API-RegistrationCBOR F-1", "cbor_malformed"), ("L3-7.1-26 F-1", "credential_id_too_long"), ("\(asr)-Resp-1 F-13", "response_malformed"),
            ("\(asr)-Resp-2 F-16", "token_binding_invalid"), ("\(asr)-Resp-3 F-4", "counter_regression"),
        ]
        for (id, code) in expected { #expect(refusal(id).contains(" \(code):"), "\(id): \(refusal(id))") }
    }

    @Test("the runner reports a server that accepts an untrusted chain and compromised authenticators")
    func catchesDefects() async throws {
        let metadata = try Self.metadataFolder()
        // Not in conformance mode, so throttling off: the run's refused responses from one address
        // are past its budget of failed results.
        let lax = try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: Self.metadataFlags(metadata) + ["--rate-limit", "off"])
        defer { lax.stop() }
        let (passed, output, _) = try await Self.runConformance(port: lax.port, metadata: metadata)
        #expect(!passed)
        // Without required trust, the server also registers authenticators that metadata reports compromised.
        #expect(output.contains("FAIL Server-ServerAuthenticatorAttestationResponse-Resp-5 F-9"))
        // ... and one whose metadata lists self attestation only, sending full attestation.
        #expect(output.contains("FAIL Server-ServerAuthenticatorAttestationResponse-Resp-6 F-2"))
        for n in 1...5 { #expect(output.contains("FAIL MDS3-Status F-\(n):")) }
        // ... and authenticators named only in a compromised entry or in BLOBs it rejected (untrusted, but accepted).
        for n in 2...6 { #expect(output.contains("FAIL Server-MDS-1 F-\(n):")) }
        #expect(output.split(separator: "\n").last?.hasSuffix(" 12 failed") == true, "\(output.split(separator: "\n").filter { $0.hasPrefix("FAIL") })")
    }
}
