import Foundation
import Testing
import WebAuthnTesting
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

// The `compound` format (L3 §8.9).
extension AttestationFormatTests {
    @Test("compound: every statement must verify; no nesting; at least two")
    func compound() {
        var f = W3CFixture("w3c-packed-es256.json")
        let packed = CBOR.map([CBORPair(.text("fmt"), .text("packed")), CBORPair(.text("attStmt"), f.statement)])
        f.format = "compound"
        f.statement = .array([packed, packed])
        #expect(f.code() == nil)
        f.statement = .array([packed])
        #expect(f.code() == "attestation_statement_malformed")
        f.statement = .array([packed, .map([CBORPair(.text("fmt"), .text("compound")), CBORPair(.text("attStmt"), .array([packed, packed]))])])
        #expect(f.code() == "attestation_statement_malformed")
        var broken = W3CFixture("w3c-packed-es256.json")
        broken.set("sig", .bytes([0x30, 0x00]))
        f.statement = .array([packed, .map([CBORPair(.text("fmt"), .text("packed")), CBORPair(.text("attStmt"), broken.statement)])])
        #expect(f.code() == "attestation_signature_invalid")
    }

    @Test("compound: step 25 assesses every statement under its own format; an expired chain anywhere fails; one untrusted statement makes it untrusted")
    func compoundTrust() throws {
        // Red team, round 26: trust was assessed on the first chain alone, under the format name
        // `compound` (no roots): an expired chain after a trusted one passed.
        let f = W3CFixture("w3c-packed-es256.json")
        func packed(_ statement: CBOR) -> CBOR { .map([CBORPair(.text("fmt"), .text("packed")), CBORPair(.text("attStmt"), statement)]) }
        var expired = f
        var b = CertificateBuilder(subject: [("C", "AA"), ("O", "W3C"), ("OU", "Authenticator Attestation"), ("CN", "expired")])
        b.notAfter = Date(timeIntervalSince1970: 1_750_000_000)
        b.extensions = [(X509Certificate.OID.basicConstraints, true, D.basicConstraintsCAFalse)]
        expired.set("x5c", .array([.bytes(f.issue(b, key: f.attestationKey))]))
        let selfSigned = CBOR.map([
            CBORPair(.text("alg"), CBOR(COSEAlgorithm.es256.rawValue)),
            CBORPair(.text("sig"), .bytes(try f.credentialKey.sign(f.authData, f.clientDataHash))),
        ])
        var compound = f
        compound.format = "compound"
        compound.statement = .array([packed(f.statement), packed(f.statement)])
        // Each statement's chain under the packed roots.
        let trusted = try compound.verify { $0.attestation.requireTrustedAttestation = true }
        #expect(trusted.trust.trusted && trusted.attestationType == .basic, "\(trusted.trust.reason)")
        for (index, order) in [[f.statement, expired.statement], [expired.statement, f.statement]].reversed().enumerated() {
            compound.statement = .array(order.map(packed))
            #expect(compound.code() == "certificate_expired")
            // The message names the statement (re-check of round 26).
            #expect(throws: WebAuthnError.self) {
                do { _ = try compound.verify() } catch let error as WebAuthnError {
                    #expect(error.message.hasPrefix("compound statement \(index) (packed): "), "\(error.message)")
                    throw error
                }
            }
        }
        // Every statement's chain is kept for later audits: a compromise FIDO reports afterwards
        // for the second statement's key flags the credential (only the first chain was kept).
        let secondKey = try SigningKey.generate(.es256)
        var leaf = CertificateBuilder(subject: [("C", "AA"), ("O", "W3C"), ("OU", "Authenticator Attestation"), ("CN", "second")])
        leaf.extensions = [(X509Certificate.OID.basicConstraints, true, D.basicConstraintsCAFalse)]
        let secondCertificate = f.issue(leaf, key: secondKey)
        let second = CBOR.map([
            CBORPair(.text("alg"), CBOR(COSEAlgorithm.es256.rawValue)),
            CBORPair(.text("sig"), .bytes(try secondKey.sign(f.authData, f.clientDataHash))),
            CBORPair(.text("x5c"), .array([.bytes(secondCertificate)])),
        ])
        compound.statement = .array([packed(f.statement), packed(second)])
        let both = try compound.verify()
        #expect(both.trust.trusted && both.credential.attestationChain.contains(secondCertificate), "\(both.trust.reason)")
        var reported = TrustAnchors.builtIn
        reported.add(
            try FIDOMetadata.payload([
                "no": 1, "nextUpdate": "2099-01-01",
                "entries": [
                    [
                        "aaguid": "7d1351a6-e097-4852-b8bf-c9ac5c9ce600",
                        "metadataStatement": ["description": "another model", "attestationTypes": ["basic_full"], "attestationRootCertificates": []],
                        "statusReports": [
                            [
                                "status": "ATTESTATION_KEY_COMPROMISE", "effectiveDate": "2025-01-01",
                                "certificate": .string(Data(secondCertificate).base64EncodedString()),
                            ]
                        ],
                    ]
                ],
            ]).entries)
        #expect(
            CredentialAudit.flag(for: both.credential, anchors: reported, at: Date(timeIntervalSince1970: 1_893_456_000))?.status.rawValue
                == "ATTESTATION_KEY_COMPROMISE")
        compound.statement = .array([packed(f.statement), packed(selfSigned)])
        let mixed = try compound.verify()
        #expect(!mixed.trust.trusted && mixed.attestationType == .`self`, "\(mixed.trust.reason)")
        // A policy that refuses self attestation refuses it inside a compound statement too.
        #expect(compound.code { $0.attestation.acceptedTypes = [.basic, .attca, .anonca] } == "attestation_type_not_allowed")
    }

    @Test("compound: a statement with a member beside fmt and attStmt is refused")
    func compoundExtraMember() {
        var f = W3CFixture("w3c-packed-es256.json")
        let packed = [CBORPair(.text("fmt"), .text("packed")), CBORPair(.text("attStmt"), f.statement)]
        f.format = "compound"
        f.statement = .array([.map(packed), .map(packed + [CBORPair(.text("extra"), .text("x"))])])
        #expect(f.code() == "attestation_statement_malformed")
    }

}
