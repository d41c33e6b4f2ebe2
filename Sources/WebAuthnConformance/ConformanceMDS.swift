internal import Foundation
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The FIDO MDS3 BLOBs of the list's "Metadata Service" group (the tool's mds-1.js): a
/// signing PKI of its own (a root, two intermediates, three signing certificates, CRLs)
/// and one BLOB per case, each naming one authenticator (its own AAGUID) under the
/// runner's attestation root. Only the good BLOB may be used by the server under test.
enum ConformanceMDS {
    struct Case: Sendable {
        let number: String
        let file: String
        let aaguid: AAGUID
        let intent: String
        var passes: Bool { number.hasPrefix("P") }
    }

    static let cases: [Case] = [
        ("P-1", "good", "packed full attestation from an authenticator named in a valid BLOB verifies"),
        ("F-2", "bad-report", "packed full attestation from an authenticator whose BLOB entry reports ATTESTATION_KEY_COMPROMISE fails"),
        ("F-3", "bad-signature", "packed full attestation from an authenticator named only in a BLOB whose signature does not verify fails"),
        ("F-4", "bad-chain", "packed full attestation from an authenticator named only in a BLOB whose signing chain does not lead to the metadata root fails"),
        ("F-5", "revoked-intermediate", "packed full attestation from an authenticator named only in a BLOB whose signing intermediate is revoked fails"),
        ("F-6", "revoked-signer", "packed full attestation from an authenticator named only in a BLOB whose signing certificate is revoked fails"),
    ].enumerated().map { i, item in
        Case(number: item.0, file: item.1, aaguid: AAGUID("7d1351a6-e097-4852-b8bf-c9ac5c9ce6\(String(format: "%02x", i))")!, intent: item.2)
    }

    /// Writes `folder`/mds: the BLOBs, the signing root (mds-root.pem) and the CRLs (*.crl, DER).
    static func write(folder: String, authority: AttestationAuthority) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        func write(_ name: String, _ bytes: [UInt8]) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(name)))
        }
        func ca(_ name: String, serial: UInt64, key: SigningKey, issuer: X509Certificate?, issuerKey: SigningKey) throws -> X509Certificate {
            var b = CertificateBuilder.certificateAuthority(organization: "webauthn conformance runner", name: name)
            b.serial = serial
            return try b.build(key: key, issuer: issuer, issuerKey: issuerKey)
        }
        func signer(_ serial: UInt64, issuer: X509Certificate, issuerKey: SigningKey) throws -> (X509Certificate, SigningKey) {
            let key = try SigningKey.generate(.rs256)
            var b = CertificateBuilder(subject: [("C", "AA"), ("O", "webauthn conformance runner"), ("CN", "MDS BLOB signer \(serial)")])
            b.serial = serial
            b.extensions = [(X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse)]
            return (try b.build(key: key, issuer: issuer, issuerKey: issuerKey), key)
        }
        let rootKey = try SigningKey.generate(.es256), i1Key = try SigningKey.generate(.es256), i2Key = try SigningKey.generate(.es256)
        let root = try ca("MDS test root", serial: 1, key: rootKey, issuer: nil, issuerKey: rootKey)
        let i1 = try ca("MDS test intermediate", serial: 11, key: i1Key, issuer: root, issuerKey: rootKey)
        let i2 = try ca("MDS revoked intermediate", serial: 12, key: i2Key, issuer: root, issuerKey: rootKey)
        let good = try signer(21, issuer: i1, issuerKey: i1Key)
        let underRevoked = try signer(22, issuer: i2, issuerKey: i2Key)
        let revoked = try signer(23, issuer: i1, issuerKey: i1Key)
        let strangerKey = try SigningKey.generate(.es256)
        let stranger = try ca("Unknown root", serial: 1, key: strangerKey, issuer: nil, issuerKey: strangerKey)
        let foreign = try signer(24, issuer: stranger, issuerKey: strangerKey)

        try write("mds-root.pem", Array(root.pem.utf8))
        try write("mds-root.crl", CRLBuilder(revoking: [12]).build(issuer: root, issuerKey: rootKey))
        try write("mds-intermediate.crl", CRLBuilder(revoking: [23]).build(issuer: i1, issuerKey: i1Key))
        try write("mds-revoked-intermediate.crl", CRLBuilder().build(issuer: i2, issuerKey: i2Key))
        for (i, item) in cases.enumerated() {
            let status = item.file == "bad-report" ? "ATTESTATION_KEY_COMPROMISE" : "FIDO_CERTIFIED"
            let payload: JSONValue = [
                "legalHeader": "webauthn conformance runner test metadata; not FIDO's", "no": .number(Double(i + 1)), "nextUpdate": "2099-01-01",
                "entries": [
                    [
                        "aaguid": .string(item.aaguid.description),
                        "metadataStatement": authority.metadataStatement(aaguid: item.aaguid, description: "webauthn conformance runner MDS \(item.file)"),
                        "statusReports": [["status": .string(status), "effectiveDate": "2024-01-01"]], "timeOfLastStatusChange": "2024-01-01",
                    ]
                ],
            ]
            let (cert, key, chain): (X509Certificate, SigningKey, [X509Certificate]) =
                switch item.file {
                case "bad-chain": (foreign.0, foreign.1, [stranger])
                case "revoked-intermediate": (underRevoked.0, underRevoked.1, [i2])
                case "revoked-signer": (revoked.0, revoked.1, [i1])
                default: (good.0, good.1, [i1])
                }
            var jws = try JWSWriter.compact(payload, key: key, x5c: [cert] + chain, type: "JWT")
            if item.file == "bad-signature" { jws[jws.count - 5] = jws[jws.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A") }
            try write("\(item.file).jwt", jws)
        }
    }
}
