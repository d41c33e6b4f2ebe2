import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The inputs the fuzz targets (Fuzz/, Docs/Fuzzing.md) crashed on, kept in
/// TestVectors/negative/fuzz/<target>/: each must now be refused with a
/// `WebAuthnError`. `make fuzz-smoke` also replays them through the targets.
@Suite("Fuzz findings stay fixed")
struct FuzzRegressionTests {
    @Test("the findings folder holds its inputs (an empty folder would pass vacuously)")
    func folderHoldsFindings() { #expect(Self.findings.count >= 1, "\(Self.findings.count) findings in TestVectors/negative/fuzz") }

    static let folder = Vectors.root.appendingPathComponent("negative/fuzz")

    /// Every recorded input, as "target/file".
    static let findings: [String] = {
        let targets = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return targets.sorted().flatMap { target -> [String] in
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder.appendingPathComponent(target).path, isDirectory: &isDirectory),
                isDirectory.boolValue
            else { return [] }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(target).path)) ?? []
            return files.filter { !$0.hasPrefix(".") }.sorted().map { "\(target)/\($0)" }
        }
    }()

    @Test("a recorded fuzz finding is refused with a WebAuthnError", arguments: findings)
    func finding(path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: Self.folder.appendingPathComponent(path)))
        let target = String(path.split(separator: "/")[0])
        switch target {
        case "safetynet-jws":
            // JWS signatures are converted to DER; a long ES512 signature once overflowed a UInt8 length.
            let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey())).publicKey
            let code = errorCode {
                let jws = try JWS(compact: bytes)
                try jws.verifySignature(with: key)
            }
            #expect(code != nil && code?.hasPrefix("not a") == false, "\(code ?? "accepted")")
        default:
            Issue.record("no replay for fuzz target \(target): add one to FuzzRegressionTests")
        }
    }
}
