import Foundation
import Testing
import WebAuthnTesting
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

typealias D = DERWriter

/// Every requirement of every attestation format (WebAuthn L3 §8), one test
/// each: a W3C vector with exactly that requirement broken.
@Suite("Attestation formats (WebAuthn L3 §8)")
struct AttestationFormatTests {
    // MARK: packed (§8.2)

    /// The W3C packed vector with its attestation certificate re-issued (for the vector's
    /// attestation key, so attStmt.sig still verifies) from a template that meets §8.2.1,
    /// after `configure`; with `version1`, the certificate is re-encoded as X.509 version 1.
    func packedCertificate(version1: Bool = false, _ configure: (inout CertificateBuilder) -> Void = { _ in }) throws -> W3CFixture {
        var f = W3CFixture("w3c-packed-es256.json")
        var b = CertificateBuilder(subject: [("C", "AA"), ("O", "WebAuthn Testing"), ("OU", "Authenticator Attestation"), ("CN", "Packed Test")])
        b.extensions = [
            (X509Certificate.OID.basicConstraints, true, D.basicConstraintsCAFalse), (X509Certificate.OID.fidoGenCeAAGUID, false, D.aaguid(f.aaguid)),
        ]
        configure(&b)
        let der = f.issue(b, key: f.attestationKey)
        f.set("x5c", .array([.bytes(version1 ? try D.version1(der, issuerKey: f.caKey) : der)]))
        return f
    }

    @Test("packed: an RS1 attestation signature is refused under the default policy")
    func packedRS1() {
        var f = W3CFixture("w3c-packed-es256.json")
        f.set("alg", CBOR(COSEAlgorithm.rs1.rawValue))
        #expect(f.code() == "algorithm_not_allowed")
    }

    @Test("packed: an attStmt.alg that is not a supported COSE algorithm is refused")
    func packedUnsupportedAlgorithm() {
        var f = W3CFixture("w3c-packed-es256.json")
        f.set("alg", CBOR(-260))
        #expect(f.code() == "algorithm_unsupported")
    }

    @Test("packed step 1: an attStmt member other than alg, sig and x5c is refused")
    func packedExtraMember() {
        var f = W3CFixture("w3c-packed-es256.json")
        #expect(f.code() == nil)
        f.set("extra", .text("not in the packed syntax"))
        #expect(f.code() == "attestation_statement_malformed")
    }

    @Test("packed step 3: a self attestation alg other than the credential key's (ESP256 for an ES256 key) is refused")
    func packedSelfAlgorithm() {
        var f = W3CFixture("w3c-packed-self-es256.json")
        #expect(f.code() == nil)
        // ESP256 and ES256 sign alike with a P-256 key, so the signature still verifies: only the alg comparison refuses.
        f.set("alg", CBOR(COSEAlgorithm.esp256.rawValue))
        #expect(f.code() == "attestation_statement_malformed")
    }

    @Test("§8.2.1: a conforming re-issued packed attestation certificate verifies")
    func packedCertificateValid() throws {
        #expect(try packedCertificate().code() == nil)
    }

    @Test("§8.2.1: a version-1 attestation certificate is refused, even with every other requirement met")
    func packedCertificateVersion1() throws {
        #expect(try packedCertificate(version1: true).code() == "attestation_certificate_invalid")
    }

    @Test("§8.2.1: subject C must be an ISO 3166 alpha-2 code; lower case \"us\" is refused")
    func packedCertificateCountry() throws {
        let f = try packedCertificate { b in b.subject[0] = ("C", "us") }
        #expect(f.code() == "attestation_certificate_invalid")
    }

    // MARK: fido-u2f (§8.6)

    /// The W3C fido-u2f vector with the all-zero AAGUID a U2F client sends
    /// (the AAGUID is not in the U2F signature base, so it still verifies).
    func u2f() -> W3CFixture {
        var f = W3CFixture("w3c-fido-u2f-es256.json")
        f.authData.replaceSubrange(37..<53, with: [UInt8](repeating: 0, count: 16))
        return f
    }

    @Test("fido-u2f: a valid statement verifies and chains to its root")
    func u2fValid() throws {
        let result = try u2f().verify()
        #expect(result.format == "fido-u2f" && result.attestationType == .basic && result.trust.trusted)
    }

    @Test("fido-u2f: the AAGUID must be all zero")
    func u2fAAGUID() {
        #expect(W3CFixture("w3c-fido-u2f-es256.json").code() == "attestation_aaguid_mismatch")
    }

    @Test("fido-u2f step 1: exactly one certificate in x5c")
    func u2fOneCertificate() {
        var f = u2f()
        let cert = f.statement["x5c"]!.arrayValue![0]
        f.set("x5c", .array([cert, cert]))
        #expect(f.code() == "attestation_statement_malformed")
    }

    @Test("fido-u2f step 2: the attestation key must be P-256")
    func u2fP256() throws {
        var f = u2f()
        let p384 = try SigningKey.generate(.es384)
        var b = CertificateBuilder(subject: [("CN", "U2F P-384")])
        b.extensions = [(X509Certificate.OID.basicConstraints, true, D.basicConstraintsCAFalse)]
        f.set("x5c", .array([.bytes(f.issue(b, key: p384))]))
        #expect(f.code() == "attestation_certificate_invalid")
    }

    @Test("fido-u2f step 5: the signature over the U2F signature base must verify")
    func u2fSignature() {
        var f = u2f()
        var sig = f.statement["sig"]!.bytesValue!
        sig[sig.count - 2] ^= 1
        f.set("sig", .bytes(sig))
        #expect(f.code() == "attestation_signature_invalid")
    }

    @Test("fido-u2f step 3: a P-256 credential key labelled with an alg other than ES256 (ESP256) is refused")
    func u2fCredentialAlgorithm() throws {
        var f = u2f()
        let ceremony = PendingCeremony(
            kind: .registration, challenge: f.setup.registrationCeremony.challenge, user: f.setup.user, algorithms: [.es256, .esp256],
            userVerification: .preferred, expiresAt: .distantFuture)
        let verify = { (f: W3CFixture) in errorCode { _ = try RegistrationVerifier.verify(f.response, ceremony: ceremony, relyingParty: f.setup.rp) } }
        #expect(verify(f) == nil)
        // The credential public key follows rpIdHash, flags, signCount, AAGUID and the credential ID (L bytes).
        let start = 55 + (Int(f.authData[53]) << 8 | Int(f.authData[54]))
        let key = try CBORDecoder.decode(Array(f.authData[start...]))
        let relabelled = CBOR.map(key.mapValue!.map { $0.key.intValue == COSE.Label.alg ? CBORPair($0.key, CBOR(COSEAlgorithm.esp256.rawValue)) : $0 })
        f.authData.replaceSubrange(start..., with: CBOREncoder.encode(relabelled))
        // The U2F signature base holds the point, not the alg: the signature still verifies.
        #expect(verify(f) == "attestation_statement_malformed")
    }

    // MARK: apple (§8.8)

    /// An apple credential certificate for `key` with `nonce` in its extension.
    func appleCertificate(_ f: W3CFixture, key: SigningKey, nonce: [UInt8]?) -> [UInt8] {
        var b = CertificateBuilder(subject: [("CN", "Apple test credential")])
        if let nonce { b.extensions.append((X509Certificate.OID.appleNonce, false, D.sequence(D.explicit(1, D.octets(nonce))))) }
        return f.issue(b, key: key)
    }

    @Test("apple: the W3C vector verifies as anonymization CA, trusted")
    func appleValid() throws {
        let result = try W3CFixture("w3c-apple-es256.json").verify()
        #expect(result.attestationType == .anonca && result.trust.trusted)
    }

    @Test("apple step 4: the nonce extension must hold SHA-256(authData ‖ clientDataHash)")
    func appleNonce() {
        var f = W3CFixture("w3c-apple-es256.json")
        let nonce = Digest.hash(.sha256, f.authData, f.clientDataHash)
        f.set("x5c", .array([.bytes(appleCertificate(f, key: f.credentialKey, nonce: nonce))]))
        #expect(f.code() == nil)
        f.set("x5c", .array([.bytes(appleCertificate(f, key: f.credentialKey, nonce: SecureRandom.bytes(32)))]))
        #expect(f.code() == "attestation_nonce_mismatch")
        f.set("x5c", .array([.bytes(appleCertificate(f, key: f.credentialKey, nonce: nil))]))
        #expect(f.code() == "attestation_certificate_invalid")
    }

    @Test("apple step 5: the certificate key must be the credential public key")
    func appleKey() throws {
        var f = W3CFixture("w3c-apple-es256.json")
        let nonce = Digest.hash(.sha256, f.authData, f.clientDataHash)
        f.set("x5c", .array([.bytes(appleCertificate(f, key: try SigningKey.generate(.es256), nonce: nonce))]))
        #expect(f.code() == "attestation_key_mismatch")
    }

    // MARK: android-key (§8.4)

    /// An AuthorizationList with the given origin and purposes (and allApplications).
    static func authorizations(origin: Int? = nil, purposes: [Int] = [], allApplications: Bool = false) -> [UInt8] {
        var fields: [UInt8] = []
        if !purposes.isEmpty { fields += D.explicit(1, D.tlv(0x31, purposes.flatMap { D.integer($0) })) }
        if allApplications { fields += D.explicit(600, D.null()) }
        if let origin { fields += D.explicit(702, D.integer(origin)) }
        return D.sequence(fields)
    }

    func androidCertificate(_ f: W3CFixture, key: SigningKey, challenge: [UInt8], software: [UInt8] = D.sequence(), tee: [UInt8] = D.sequence()) -> [UInt8] {
        let description = D.sequence(D.integer(300), D.enumerated(1), D.integer(300), D.enumerated(1), D.octets(challenge), D.octets([]), software, tee)
        var b = CertificateBuilder(subject: [("CN", "Android Keystore Key")])
        b.extensions = [(X509Certificate.OID.androidKeyDescription, false, description)]
        return f.issue(b, key: key)
    }

    func android(challenge: [UInt8]? = nil, software: [UInt8] = D.sequence(), tee: [UInt8] = D.sequence(), key: SigningKey? = nil) throws -> W3CFixture {
        var f = W3CFixture("w3c-android-key-es256.json")
        let certKey = key ?? f.credentialKey
        f.set("x5c", .array([.bytes(androidCertificate(f, key: certKey, challenge: challenge ?? f.clientDataHash, software: software, tee: tee))]))
        f.set("sig", .bytes(try certKey.sign(f.authData, f.clientDataHash)))
        return f
    }

    @Test("android-key: the W3C vector and a re-issued certificate verify")
    func androidValid() throws {
        #expect(W3CFixture("w3c-android-key-es256.json").code() == nil)
        #expect(try android().code() == nil)
        #expect(
            try android(tee: Self.authorizations(origin: 0, purposes: [2])).code { $0.attestation.androidKeyEnforcement = .trustedExecutionEnvironment } == nil)
    }

    @Test("android-key step 2: the signature must verify with the certificate key")
    func androidSignature() throws {
        var f = try android()
        f.set("sig", .bytes(try SigningKey.generate(.es256).sign(f.authData, f.clientDataHash)))
        #expect(f.code() == "attestation_signature_invalid")
    }

    @Test("android-key step 3: the certificate key must be the credential public key")
    func androidKey() throws {
        #expect(try android(key: try SigningKey.generate(.es256)).code() == "attestation_key_mismatch")
    }

    @Test("android-key step 4: attestationChallenge must be clientDataHash")
    func androidChallenge() throws {
        #expect(try android(challenge: SecureRandom.bytes(32)).code() == "attestation_nonce_mismatch")
    }

    @Test("android-key step 4: allApplications must be absent from both lists")
    func androidAllApplications() throws {
        #expect(try android(software: Self.authorizations(allApplications: true)).code() == "attestation_certificate_invalid")
        #expect(try android(tee: Self.authorizations(allApplications: true)).code() == "attestation_certificate_invalid")
    }

    @Test("android-key step 4: origin GENERATED and purpose SIGN, in the lists the policy reads")
    func androidOriginAndPurpose() throws {
        #expect(try android(software: Self.authorizations(origin: 1)).code() == "attestation_integrity_failed")
        #expect(try android(tee: Self.authorizations(purposes: [3])).code() == "attestation_integrity_failed")
        let teeOnly: (inout VerificationPolicy) -> Void = { $0.attestation.androidKeyEnforcement = .trustedExecutionEnvironment }
        #expect(try android(software: Self.authorizations(origin: 0, purposes: [2])).code(teeOnly) == "attestation_integrity_failed")
        #expect(try android().code(teeOnly) == "attestation_integrity_failed")
    }

    @Test("android-key: an RS1 attestation signature is refused under the default policy")
    func androidRS1() throws {
        var f = try android()
        f.set("alg", CBOR(COSEAlgorithm.rs1.rawValue))
        #expect(f.code() == "algorithm_not_allowed")
    }

    // MARK: tpm (§8.3)

    /// The W3C TPM vector with certInfo rebuilt by `edit` and re-signed by its AIK.
    func tpm(_ edit: (inout [UInt8]) -> Void) throws -> W3CFixture {
        var f = W3CFixture("w3c-tpm-es256.json")
        var certInfo = f.statement["certInfo"]!.bytesValue!
        edit(&certInfo)
        f.set("certInfo", .bytes(certInfo))
        f.set("sig", .bytes(try f.attestationKey.sign(certInfo)))
        return f
    }

    @Test("tpm: the W3C vector verifies as AttCA; a re-signed certInfo too")
    func tpmValid() throws {
        #expect(try W3CFixture("w3c-tpm-es256.json").verify().attestationType == .attca)
        #expect(try tpm { _ in }.code() == nil)
    }

    @Test("tpm step 1: ver must be 2.0")
    func tpmVersion() {
        var f = W3CFixture("w3c-tpm-es256.json")
        f.set("ver", .text("1.2"))
        #expect(f.code() == "attestation_statement_malformed")
    }

    @Test("tpm step 2: pubArea's key must be the credential public key")
    func tpmPubArea() {
        var f = W3CFixture("w3c-tpm-es256.json")
        var pubArea = f.statement["pubArea"]!.bytesValue!
        pubArea[pubArea.count - 1] ^= 1
        f.set("pubArea", .bytes(pubArea))
        #expect(f.code() == "attestation_key_mismatch")
        f.set("pubArea", .bytes(Array(pubArea.dropLast(5))))
        #expect(f.code() == "attestation_statement_malformed")
        f.set("pubArea", .bytes([UInt8](repeating: 0, count: 10_000)))
        #expect(f.code() == "attestation_statement_malformed")
    }

    @Test("tpm step 4: certInfo magic and type")
    func tpmMagicAndType() throws {
        #expect(try tpm { $0[0] ^= 1 }.code() == "attestation_statement_malformed")
        #expect(try tpm { $0[5] ^= 1 }.code() == "attestation_statement_malformed")
    }

    @Test("tpm step 4: extraData must be the hash of authData ‖ clientDataHash")
    func tpmExtraData() throws {
        // magic(4) type(2) qualifiedSigner(2+n) extraData(2+32): flip extraData's last byte.
        #expect(
            try tpm { info in
                let signerLength = Int(info[6]) << 8 | Int(info[7])
                info[8 + signerLength + 2 + 31] ^= 1
            }.code() == "attestation_nonce_mismatch")
    }

    @Test("tpm step 4: the attested name must be the Name of pubArea")
    func tpmAttestedName() throws {
        #expect(try tpm { info in info[info.count - 3] ^= 1 }.code() != nil)
        #expect(
            try tpm { info in
                // The attested name sits before qualifiedName; flip its last byte.
                var r = TPM.Reader(info)
                _ = try? r.take(6); _ = try? r.sized(); _ = try? r.sized(); _ = try? r.take(25)
                let start = r.offset
                let nameLength = Int(info[start]) << 8 | Int(info[start + 1])
                info[start + 2 + nameLength - 1] ^= 1
            }.code() == "attestation_key_mismatch")
    }

    @Test("tpm step 5: the signature over certInfo must verify with the AIK")
    func tpmSignature() {
        var f = W3CFixture("w3c-tpm-es256.json")
        var sig = f.statement["sig"]!.bytesValue!
        sig[sig.count - 2] ^= 1
        f.set("sig", .bytes(sig))
        #expect(f.code() == "attestation_signature_invalid")
    }

    /// The W3C TPM vector with an AIK certificate re-issued by `configure`.
    func tpmAIK(_ configure: (inout CertificateBuilder) -> Void) -> W3CFixture {
        var f = W3CFixture("w3c-tpm-es256.json")
        var b = CertificateBuilder()
        b.extensions = [
            (X509Certificate.OID.subjectAltName, true, D.tpmSAN()),
            (X509Certificate.OID.extendedKeyUsage, false, D.extendedKeyUsage(X509Certificate.OID.tcgKpAIKCertificate)),
            (X509Certificate.OID.basicConstraints, true, D.basicConstraintsCAFalse),
        ]
        configure(&b)
        f.set("x5c", .array([.bytes(f.issue(b, key: f.attestationKey))]))
        return f
    }

    @Test("§8.3.1: a conforming AIK certificate verifies")
    func aikValid() {
        #expect(tpmAIK { _ in }.code() == nil)
    }

    @Test(
        "§8.3.1: each AIK certificate requirement is enforced",
        arguments: [
            "subject not empty", "no SAN", "SAN not critical", "SAN without tpmModel", "no EKU", "EKU without tcg-kp-AIKCertificate",
            "CA true", "no basic constraints", "version 1", "AAGUID mismatch", "AAGUID critical",
        ])
    func aikRequirements(rule: String) {
        let f = tpmAIK { b in
            func replace(_ oid: String, _ critical: Bool, _ der: [UInt8]?) {
                b.extensions.removeAll { $0.oid == oid }
                if let der { b.extensions.append((oid, critical, der)) }
            }
            switch rule {
            case "subject not empty": b.subject = [("CN", "AIK")]
            case "no SAN": replace(X509Certificate.OID.subjectAltName, true, nil)
            case "SAN not critical": replace(X509Certificate.OID.subjectAltName, false, D.tpmSAN())
            case "SAN without tpmModel": replace(X509Certificate.OID.subjectAltName, true, D.tpmSAN(model: nil))
            case "no EKU": replace(X509Certificate.OID.extendedKeyUsage, false, nil)
            case "EKU without tcg-kp-AIKCertificate": replace(X509Certificate.OID.extendedKeyUsage, false, D.extendedKeyUsage("1.3.6.1.5.5.7.3.2"))
            case "CA true": replace(X509Certificate.OID.basicConstraints, true, D.basicConstraintsCATrue)
            case "no basic constraints": replace(X509Certificate.OID.basicConstraints, true, nil)
            case "version 1": b.version = 1; b.extensions = []
            case "AAGUID mismatch": replace(X509Certificate.OID.fidoGenCeAAGUID, false, D.aaguid(SecureRandom.bytes(16)))
            default: replace(X509Certificate.OID.fidoGenCeAAGUID, true, D.aaguid(Array(repeating: 0, count: 16)))
            }
        }
        #expect(f.code() == (rule == "AAGUID mismatch" ? "attestation_aaguid_mismatch" : "attestation_certificate_invalid"), "\(rule)")
    }

    @Test("tpm: RS1 certInfo signatures follow allowSHA1TPMAttestation")
    func tpmSHA1() throws {
        var f = W3CFixture("w3c-tpm-es256.json")
        f.set("alg", CBOR(-65535))
        #expect(f.code() != nil)  // an ES256 AIK cannot make an RS1 signature
        #expect(f.code { $0.attestation.allowSHA1TPMAttestation = false } == "algorithm_not_allowed")
    }

    @Test("tpm: certInfo with a trailing byte is refused (TPM structures are parsed exactly)")
    func tpmTrailingByte() throws {
        #expect(try tpm { $0.append(0) }.code() == "attestation_statement_malformed")
    }

    /// The offset in a TPMT_PUBLIC of its type-specific parameters: TPMS_RSA_PARMS' keyBits
    /// (exponent and modulus follow) or TPMS_ECC_PARMS' curveID (kdf, x and y follow).
    static func tpmParametersOffset(_ pubArea: [UInt8]) throws -> Int {
        var r = TPM.Reader(pubArea)
        _ = try r.take(8)  // type, nameAlg, objectAttributes
        _ = try r.sized()  // authPolicy
        if try r.u16() != TPM.Alg.null { _ = try r.take(4) }  // symmetric
        if try r.u16() != TPM.Alg.null { _ = try r.take(2) }  // scheme
        return r.offset
    }

    /// A tpm attStmt with `pubArea` in place of its own, certInfo's attested name recomputed
    /// for it (nameAlg ‖ hash(pubArea)) and certInfo re-signed by `aik`: every check holds but
    /// whether pubArea's key is the credential public key.
    static func tpmStatement(_ statement: CBOR, pubArea: [UInt8], aik: SigningKey) throws -> CBOR {
        var certInfo = statement["certInfo"]!.bytesValue!
        var r = TPM.Reader(certInfo)
        _ = try r.take(6)  // magic, type
        _ = try r.sized()  // qualifiedSigner
        _ = try r.sized()  // extraData
        _ = try r.take(TPM.clockInfoSize + 8)  // clockInfo, firmwareVersion
        let start = r.offset
        _ = try r.sized()  // attested.name
        let nameAlg = UInt16(pubArea[2]) << 8 | UInt16(pubArea[3])
        let name = Array(pubArea[2..<4]) + Digest.hash(TPM.digest(forNameAlg: nameAlg)!, parts: [pubArea])
        certInfo.replaceSubrange(start..<r.offset, with: [UInt8(name.count >> 8), UInt8(name.count & 0xff)] + name)
        return statement.replacing("pubArea", with: .bytes(pubArea)).replacing("certInfo", with: .bytes(certInfo))
            .replacing("sig", with: .bytes(try aik.sign(certInfo)))
    }

    /// The W3C TPM vector (an ECC P-256 pubArea) with pubArea changed by `edit`, given the
    /// offset of its curveID and of its x coordinate, then re-certified by the AIK.
    func tpmECC(_ edit: (inout [UInt8], _ curve: Int, _ x: Int) -> Void) throws -> W3CFixture {
        var f = W3CFixture("w3c-tpm-es256.json")
        var pubArea = f.statement["pubArea"]!.bytesValue!
        let curve = try Self.tpmParametersOffset(pubArea)
        let kdf = UInt16(pubArea[curve + 2]) << 8 | UInt16(pubArea[curve + 3])
        let x = curve + (kdf == TPM.Alg.null ? 4 : 6) + 2
        edit(&pubArea, curve, x)
        f.statement = try Self.tpmStatement(f.statement, pubArea: pubArea, aik: f.attestationKey)
        return f
    }

    @Test("tpm step 2: pubArea naming P-384 for the credential's P-256 point is refused")
    func tpmPubAreaCurve() throws {
        #expect(try tpmECC { _, _, _ in }.code() == nil)
        #expect(try tpmECC { p, curve, _ in p[curve + 1] = UInt8(TPM.ECCCurve.nistP384) }.code() == "attestation_key_mismatch")
    }

    @Test("tpm step 2: a pubArea holding another P-256 point than the credential key is refused")
    func tpmPubAreaPoint() throws {
        let other = try SigningKey.generate(.es256).coseKey()[COSE.Label.x]!.bytesValue!
        #expect(try tpmECC { p, _, x in p.replaceSubrange(x..<x + other.count, with: other) }.code() == "attestation_key_mismatch")
    }

    /// An RS256 credential with tpm attestation by the software authenticator, its pubArea
    /// changed by `edit` (given the offset of keyBits; exponent and modulus follow) and re-certified.
    func tpmRSA(_ edit: (inout [UInt8], _ parameters: Int) -> Void) throws -> String? {
        let authority = try AttestationAuthority.generate()
        let h = Harness()
        var parts = try h.register(.rs256, attestation: .tpm(authority))
        var pubArea = parts.statement["pubArea"]!.bytesValue!
        edit(&pubArea, try Self.tpmParametersOffset(pubArea))
        parts.statement = try Self.tpmStatement(parts.statement, pubArea: pubArea, aik: authority.attestationKey)
        return h.verify(parts, ceremony: h.registrationCeremony(algorithms: [.rs256]))
    }

    @Test("tpm step 2: a pubArea whose RSA modulus is not the credential key's is refused")
    func tpmPubAreaModulus() throws {
        #expect(try tpmRSA { _, _ in } == nil)
        // keyBits(2), exponent(4), then the modulus as a TPM2B: change its last byte.
        #expect(try tpmRSA { p, _ in p[p.count - 1] ^= 0x02 } == "attestation_key_mismatch")
    }

    @Test("tpm step 2: a pubArea whose RSA exponent (3) is not the credential key's (65537) is refused")
    func tpmPubAreaExponent() throws {
        #expect(try tpmRSA { p, parameters in p.replaceSubrange(parameters + 2..<parameters + 6, with: [0, 0, 0, 3]) } == "attestation_key_mismatch")
    }

    @Test("§8.3.1: a version-1 AIK certificate is refused, even with every required extension")
    func aikVersion1() throws {
        var f = tpmAIK { _ in }
        let der = f.statement["x5c"]!.arrayValue![0].bytesValue!
        f.set("x5c", .array([.bytes(try D.version1(der, issuerKey: f.caKey))]))
        #expect(f.code() == "attestation_certificate_invalid")
    }

    // MARK: shared rules (compound: AttestationFormatTests+Compound.swift)

    @Test("x5c: thousands of entries, a malformed certificate, a non-array are typed errors")
    func x5cBounds() {
        var f = W3CFixture("w3c-packed-es256.json")
        let cert = f.statement["x5c"]!.arrayValue![0]
        f.set("x5c", .array(Array(repeating: cert, count: 3000)))
        #expect(f.code() == "input_too_large")  // the CBOR size bound comes first
        f.set("x5c", .array(Array(repeating: cert, count: 20)))
        #expect(f.code() == "attestation_statement_malformed")  // then at most 8 certificates
        f.set("x5c", .array([.bytes([0x30, 0x03, 0x02, 0x01, 0x01])]))
        #expect(f.code() == "attestation_certificate_invalid")
        f.set("x5c", .array([.bytes(cert.bytesValue! + [0])]))
        #expect(f.code() == "attestation_certificate_invalid")
        f.set("x5c", .bytes(cert.bytesValue!))
        #expect(f.code() == "attestation_statement_malformed")
    }
}
