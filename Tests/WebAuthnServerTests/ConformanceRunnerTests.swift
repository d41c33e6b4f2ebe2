import Foundation
import Testing
import WebAuthnCore

/// `webauthn conformance` against `webauthn serve`: every case must pass
/// against the project's own server, and the runner must catch a defect.
@Suite("Conformance runner", .serialized)
struct ConformanceRunnerTests {
    static func runConformance(port: Int, metadata: String) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = ServeProcess.binary
        process.arguments = ["conformance", "--url", "http://127.0.0.1:\(port)", "--rp-id", ServeProcess.rpId, "--origin", ServeProcess.origin,
                             "--metadata-out", metadata]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func metadataFolder() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-\(UUID().uuidString)").path
        let process = Process()
        process.executableURL = ServeProcess.binary
        process.arguments = ["conformance", "--url", "http://127.0.0.1:1", "--rp-id", ServeProcess.rpId, "--origin", ServeProcess.origin,
                             "--metadata-out", folder, "--write-metadata-only"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return folder
    }

    @Test("every case passes against webauthn serve with the runner's metadata and trusted attestation required")
    func allCasesPass() throws {
        let metadata = try Self.metadataFolder()
        let server = try ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--metadata", metadata, "--require-trusted-attestation"])
        defer { server.stop() }
        let (status, output) = try Self.runConformance(port: server.port, metadata: metadata)
        let failures = output.split(separator: "\n").filter { $0.hasPrefix("FAIL") }
        #expect(status == 0, "\(failures)")
        #expect(failures.isEmpty)
        let summary = output.split(separator: "\n").last.map(String.init) ?? ""
        #expect(summary.range(of: #"^\d+ passed, 0 failed$"#, options: .regularExpression) != nil, "\(summary)")
        #expect(output.contains("PASS Server-ServerAuthenticatorAttestationResponse-Resp-5 P-1"))
        for id in ["L3-8.2.1 P-1", "L3-8.2.1 F-1", "L3-8.2.1 F-2", "L3-8.2.1 F-7", "L3-8.2 F-1", "L3-8.3 P-2", "L3-8.3 F-4", "API-RegistrationJSON F-13", "Server-ServerAuthenticatorAttestationResponse-Resp-B P-1", "L3-8.5 F-3", "MDS3-Status F-1", "MDS3-Status P-1"] { #expect(output.contains("PASS \(id)\n"), "\(id)") }
    }

    @Test("the runner reports a server that accepts an untrusted chain and compromised authenticators")
    func catchesDefects() throws {
        let metadata = try Self.metadataFolder()
        let lax = try ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--metadata", metadata])
        defer { lax.stop() }
        let (status, output) = try Self.runConformance(port: lax.port, metadata: metadata)
        #expect(status == 1)
        // Without required trust, the server also registers authenticators that metadata reports compromised.
        #expect(output.contains("FAIL Server-ServerAuthenticatorAttestationResponse-Resp-5 F-9"))
        for n in 1...5 { #expect(output.contains("FAIL MDS3-Status F-\(n):")) }
        #expect(output.split(separator: "\n").last?.hasSuffix(" 6 failed") == true)
    }
}
