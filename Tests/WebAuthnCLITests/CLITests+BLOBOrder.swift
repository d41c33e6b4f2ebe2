import Foundation
import Testing
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnCrypto
import _WebAuthnEncoding

extension CLITests {
    @Test("--metadata and --mds-blob are read in one order of `no`: the newest BLOB supplies the roots, whichever option names it")
    func blobOrderAcrossOptions() async throws {
        // Re-check of round 28: `--metadata` was added before every `--mds-blob`, so an older BLOB
        // given as `--mds-blob` restored a root that the newer one, given as `--metadata`, had
        // moved away, and a chain to the new root was refused.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webauthn-blob-order-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A BLOB signing PKI of the test's own: a root, and a signer under it.
        let mdsRootKey = try SigningKey.generate(.es256), signerKey = try SigningKey.generate(.rs256)  // the writer signs RS256
        let mdsRoot = try CertificateBuilder.certificateAuthority(organization: "blob order test", name: "BLOB root").build(
            key: mdsRootKey, issuer: nil, issuerKey: mdsRootKey)
        var signerTemplate = CertificateBuilder(subject: [("C", "AA"), ("O", "blob order test"), ("CN", "BLOB signer")])
        signerTemplate.serial = 2
        signerTemplate.extensions = [(X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse)]
        let signer = try signerTemplate.build(key: signerKey, issuer: mdsRoot, issuerKey: mdsRootKey)
        try Data(mdsRoot.pem.utf8).write(to: URL(fileURLWithPath: folder + "/mds-root.pem"))

        // One authenticator model; the older BLOB (no 5) lists the root `old` attests under, the
        // newer (no 9) only `new`'s.
        let old = try AttestationAuthority.generate(name: "old vendor root"), new = try AttestationAuthority.generate(name: "new vendor root")
        var profile = SoftwareAuthenticator.Profile.securityKey
        profile.aaguid = [UInt8](repeating: 0x6d, count: 16)
        let aaguid = try #require(AAGUID(bytes: profile.aaguid))
        func blob(_ no: Int, _ authority: AttestationAuthority) throws -> String {
            let payload: JSONValue = [
                "no": .number(Double(no)), "nextUpdate": "2099-01-01",
                "entries": [["aaguid": .string(aaguid.description), "metadataStatement": authority.metadataStatement(aaguid: aaguid, description: "model")]],
            ]
            let path = folder + "/no\(no).jwt"
            try Data(try JWSWriter.compact(payload, key: signerKey, x5c: [signer], type: "JWT")).write(to: URL(fileURLWithPath: path))
            return path
        }
        let older = try blob(5, old), newer = try blob(9, new)
        func verify(_ authority: AttestationAuthority, _ metadata: [String]) async throws -> Run {
            let challenge = SecureRandom.bytes(32)
            let parts = try SoftwareAuthenticator(profile: profile).register(
                rpId: "example.com", origin: "https://example.com", challenge: challenge, userHandle: [1], attestation: .packedFull(authority))
            return try await Self.run(
                [
                    "verify", "registration", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", Base64URL.encode(challenge),
                    "--response", try Self.write(parts.json), "--metadata-root", folder + "/mds-root.pem", "--require-trusted-attestation",
                ] + metadata)
        }
        for metadata in [["--metadata", newer, "--mds-blob", older], ["--metadata", older, "--mds-blob", newer], ["--mds-blob", older, "--mds-blob", newer]] {
            let current = try await verify(new, metadata)
            #expect(current.status == 0 && current.json?["trusted"]?.boolValue == true, "\(metadata): \(current.stdout) \(current.stderr)")
            let removed = try await verify(old, metadata)
            #expect(removed.status == 1 && removed.json?["error"]?.stringValue == "attestation_untrusted", "\(metadata): \(removed.stdout)")
        }
        // The older BLOB alone still vouches for its root: the refusal above is the newer one's doing.
        let alone = try await verify(old, ["--mds-blob", older])
        #expect(alone.status == 0 && alone.json?["trusted"]?.boolValue == true, "\(alone.stdout) \(alone.stderr)")
    }
}
