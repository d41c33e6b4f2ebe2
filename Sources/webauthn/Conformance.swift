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

    func validate() throws {
        guard URL(string: url)?.host != nil else { throw ValidationError("--url is not a URL") }
    }

    func run() async throws {
        let pki = try ConformancePKI.load(folder: metadataOut)
        if writeMetadataOnly {
            print("wrote \(pki.statementPath)")
            return
        }
        let runner = ConformanceRunner(base: url, rpId: rpId, origin: origin, pki: pki)
        var passed = 0, failed = 0
        var report: [JSONValue] = []
        for testCase in ConformanceCases.all(runner) where only.map({ testCase.id.contains($0) }) ?? true {
            let outcome: String?
            do {
                try await testCase.run()
                outcome = nil
            } catch {
                outcome = "\(error)"
            }
            if let outcome {
                failed += 1
                print("FAIL \(testCase.id): \(outcome)")
            } else {
                passed += 1
                print("PASS \(testCase.id)")
            }
            report.append(["id": .string(testCase.id), "intent": .string(testCase.intent), "passed": .bool(outcome == nil),
                           "reason": outcome.map { .string($0) } ?? .null])
        }
        print("\(passed) passed, \(failed) failed")
        if let json {
            try Data(JSONValue.object(["passed": .number(Double(passed)), "failed": .number(Double(failed)), "cases": .array(report)]).serializedBytes())
                .write(to: URL(fileURLWithPath: json))
        }
        if failed > 0 { throw ExitCode(1) }
    }
}

/// The runner's own test PKI: a root and an attestation certificate for its
/// packed authenticator, persisted in the metadata folder so that the
/// statements a server loaded and the runner's keys agree across runs.
struct ConformancePKI: Sendable {
    static let aaguid = AAGUID("7d1351a6-e097-4852-b8bf-c9ac5c9ce4a3")!
    let root: X509Certificate
    let attestationCertificate: X509Certificate
    let signer: AttestationSigner
    let statementPath: String

    static func load(folder: String) throws -> ConformancePKI {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let keyPath = (folder as NSString).appendingPathComponent("runner-attestation.key.pem")
        let certPath = (folder as NSString).appendingPathComponent("runner-attestation.cert.der")
        let rootPath = (folder as NSString).appendingPathComponent("runner-root.cert.der")
        let statementPath = (folder as NSString).appendingPathComponent("runner-packed.json")
        if let keyPEM = try? String(contentsOfFile: keyPath, encoding: .utf8),
           let cert = FileManager.default.contents(atPath: certPath), let root = FileManager.default.contents(atPath: rootPath) {
            return ConformancePKI(root: try X509Certificate(der: [UInt8](root)), attestationCertificate: try X509Certificate(der: [UInt8](cert)),
                                  signer: try AttestationSigner(pem: keyPEM), statementPath: statementPath)
        }
        let rootKey = try SigningKey.generate(.es256)
        var rootBuilder = CertificateBuilder(subject: [("C", "AA"), ("O", "webauthn conformance runner"), ("CN", "Runner Test Root")])
        rootBuilder.extensions = [("2.5.29.19", true, [0x30, 0x03, 0x01, 0x01, 0xff])]
        let root = try rootBuilder.build(key: rootKey, issuer: nil, issuerKey: rootKey)
        let key = try SigningKey.generate(.es256)
        var leaf = CertificateBuilder(subject: [("C", "AA"), ("O", "webauthn conformance runner"), ("OU", "Authenticator Attestation"), ("CN", "Runner Packed Authenticator")])
        leaf.serial = 2
        leaf.extensions = [("2.5.29.19", true, [0x30, 0x00]), (PackedAttestationOID.aaguid, false, [0x04, 0x10] + aaguid.bytes)]
        let cert = try leaf.build(key: key, issuer: root, issuerKey: rootKey)
        try key.privateKeyPEM().write(toFile: keyPath, atomically: true, encoding: .utf8)
        try Data(cert.der).write(to: URL(fileURLWithPath: certPath))
        try Data(root.der).write(to: URL(fileURLWithPath: rootPath))
        let statement: JSONValue = [
            "aaguid": .string(aaguid.description),
            "description": "webauthn conformance runner packed authenticator",
            "attestationTypes": ["basic_full"],
            "attestationRootCertificates": [.string(Data(root.der).base64EncodedString())],
        ]
        try Data(statement.serializedBytes()).write(to: URL(fileURLWithPath: statementPath))
        return try load(folder: folder)
    }
}

enum PackedAttestationOID { static let aaguid = "1.3.6.1.4.1.45724.1.1.4" }
