internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `tpm` attestation statement format (WebAuthn L3 §8.3).
enum TPMAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.tpm
    static let step = "WebAuthn L3 §8.3"
    static let aikCertificateEKU = X509Certificate.OID.tcgKpAIKCertificate
    static let sanAttributes = [
        X509Certificate.OID.tpmManufacturer: "tpmManufacturer", X509Certificate.OID.tpmModel: "tpmModel", X509Certificate.OID.tpmVersion: "tpmVersion",
    ]

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        let s = input.statement
        try AttestationFormats.checkMembers(s, allowed: ["ver", "alg", "x5c", "sig", "certInfo", "pubArea"], format: identifier, step: step)
        // Step 1: the attStmt syntax.
        guard let ver = s["ver"]?.textValue, Bytes.sameUTF8(ver, "2.0") else {
            throw WebAuthnError(.attestationStatementMalformed, "tpm attStmt.ver must be \"2.0\"", step: step + " step 1")
        }
        let (alg, sig) = try AttestationFormats.algorithmAndSignature(s, format: identifier)
        if !(alg == .rs1 && input.policy.attestation.allowSHA1TPMAttestation) {
            try AttestationFormats.checkAlgorithmAllowed(alg, policy: input.policy)
        }
        guard let certInfoBytes = s["certInfo"]?.bytesValue, let pubAreaBytes = s["pubArea"]?.bytesValue, let x5c = s["x5c"] else {
            throw WebAuthnError(.attestationStatementMalformed, "tpm attStmt needs certInfo, pubArea and x5c", step: step + " step 1")
        }
        let certificates = try AttestationFormats.certificates(x5c, format: identifier)
        let pubArea = try TPM.Public(pubAreaBytes)
        let certInfo = try TPM.Attest(certInfoBytes)
        // Step 2: pubArea's key is the credential public key.
        try checkPubAreaKey(pubArea, credential: input.credential.publicKey)
        // Steps 3–4: certInfo.
        guard certInfo.magic == TPM.generatedValue else {
            throw WebAuthnError(
                .attestationStatementMalformed, "certInfo.magic is 0x\(String(certInfo.magic, radix: 16)); expected TPM_GENERATED_VALUE", step: step + " step 4"
            )
        }
        guard certInfo.type == TPM.stAttestCertify else {
            throw WebAuthnError(
                .attestationStatementMalformed, "certInfo.type is 0x\(String(certInfo.type, radix: 16)); expected TPM_ST_ATTEST_CERTIFY", step: step + " step 4"
            )
        }
        guard let hash = alg.digest else {
            throw WebAuthnError(.algorithmUnsupported, "tpm attStmt.alg \(alg) has no hash algorithm", step: step)
        }
        let expectedExtraData = Digest.hash(hash, parts: input.signedData)
        guard certInfo.extraData == expectedExtraData else {
            throw WebAuthnError(.attestationNonceMismatch, "certInfo.extraData is not the \(hash) hash of authData ‖ clientDataHash", step: step + " step 4")
        }
        guard let nameHash = TPM.digest(forNameAlg: pubArea.nameAlg) else {
            throw WebAuthnError(
                .attestationStatementMalformed, "pubArea.nameAlg 0x\(String(pubArea.nameAlg, radix: 16)) is not a known hash", step: step + " step 4")
        }
        let name = [UInt8(pubArea.nameAlg >> 8), UInt8(pubArea.nameAlg & 0xff)] + Digest.hash(nameHash, parts: [pubAreaBytes])
        guard certInfo.attestedName == name else {
            throw WebAuthnError(.attestationKeyMismatch, "certInfo.attested.name is not the Name of pubArea (nameAlg ‖ hash(pubArea))", step: step + " step 4")
        }
        // Step 5: sig over certInfo with the AIK, and the AIK certificate requirements.
        let aik = certificates[0]
        let aikKey = try aik.publicKey()
        guard aikKey.accepts(alg), aikKey.verify(signature: sig, parts: [certInfoBytes], algorithm: alg) else {
            throw WebAuthnError(
                .attestationSignatureInvalid, "the tpm attestation signature over certInfo does not verify with the AIK (\(alg))", step: step + " step 5")
        }
        try checkAIKCertificate(aik)
        try PackedAttestation.checkAAGUIDExtension(aik, aaguid: input.credential.aaguid)
        var verification = AttestationVerification(type: .attca, trustPath: certificates)
        verification.objection = residencyObjection(pubArea.objectAttributes)
        return verification
    }

    /// Step 25's input beyond L3 §8.3.2: TPM2_Certify proves only that the TPM holds the key.
    /// Whether the TPM made it and keeps it is in pubArea's objectAttributes. A key imported into
    /// a genuine TPM (its maker keeps a copy) and certified by its AIK verifies, but vouches for no
    /// hardware-bound credential: such an attestation is reported untrusted, and refused when
    /// trusted attestation is required (red team, twenty-seventh pass). Every Windows Hello key in
    /// the vectors carries these bits; the W3C example's pubArea (`sign` alone) does not.
    static func residencyObjection(_ attributes: UInt32) -> String? {
        let missing = TPM.ObjectAttribute.resident.filter { attributes & $0.bit == 0 }.map(\.name)
        guard !missing.isEmpty else { return nil }
        let hex = String(attributes, radix: 16)
        return "pubArea.objectAttributes 0x\(hex) lacks \(missing.joined(separator: ", ")): the TPM does not vouch that it made the key and keeps it"
    }

    static func checkPubAreaKey(_ pubArea: TPM.Public, credential: COSEKey) throws(WebAuthnError) {
        switch pubArea.key {
        case .rsa(let modulus, let exponent):
            guard case .rsa(let n, let eBytes) = credential.parameters,
                n.drop(while: { $0 == 0 }) == modulus.drop(while: { $0 == 0 }),
                eBytes.reduce(UInt64(0), { $0 << 8 | UInt64($1) }) == UInt64(exponent)
            else {
                throw WebAuthnError(.attestationKeyMismatch, "pubArea's RSA key is not the credential public key", step: step + " step 2")
            }
        case .ecc(let curveID, let x, let y):
            guard case .ec2(let keyCurve, let keyX, let keyY) = credential.parameters, let curve = TPM.curves[curveID], keyCurve == curve,
                keyX == x, keyY == y
            else {
                throw WebAuthnError(.attestationKeyMismatch, "pubArea's ECC key is not the credential public key", step: step + " step 2")
            }
        }
    }

    /// §8.3.1 TPM Attestation Statement Certificate Requirements.
    static func checkAIKCertificate(_ cert: X509Certificate) throws(WebAuthnError) {
        let step = "WebAuthn L3 §8.3.1"
        guard cert.version == 3 else {
            throw WebAuthnError(.attestationCertificateInvalid, "AIK certificate version is \(cert.version); expected 3", step: step)
        }
        guard cert.subject.isEmpty else {
            throw WebAuthnError(.attestationCertificateInvalid, "the AIK certificate subject must be empty; it is \(cert.subjectSummary)", step: step)
        }
        guard let san = try cert.extension(oid: X509Certificate.OID.subjectAltName) else {
            throw WebAuthnError(.attestationCertificateInvalid, "the AIK certificate has no subject alternative name", step: step)
        }
        guard san.critical else {
            throw WebAuthnError(
                .attestationCertificateInvalid, "the AIK certificate's subject alternative name must be critical (its subject is empty)", step: step)
        }
        let attributes = try directoryNameAttributes(san.value)
        for (oid, name) in sanAttributes where attributes[oid]?.isEmpty != false {
            throw WebAuthnError(.attestationCertificateInvalid, "the AIK certificate's subject alternative name lacks \(name) (\(oid))", step: step)
        }
        guard let eku = try cert.extension(oid: X509Certificate.OID.extendedKeyUsage), try extendedKeyUsages(eku.value).contains(aikCertificateEKU) else {
            throw WebAuthnError(
                .attestationCertificateInvalid, "the AIK certificate's extended key usage lacks tcg-kp-AIKCertificate (\(aikCertificateEKU))", step: step)
        }
        guard let constraints = try cert.basicConstraints(), !constraints.isCA else {
            throw WebAuthnError(.attestationCertificateInvalid, "the AIK certificate must have basic constraints with CA false", step: step)
        }
    }

    /// The attributes of the directoryName entries of a GeneralNames value, by OID.
    /// Attributes may sit in one RDN or one each (both occur in real TPMs).
    static func directoryNameAttributes(_ der: [UInt8]) throws(WebAuthnError) -> [String: String] {
        let names = try DER.parse(der)
        guard names.tag == DER.Tag.sequence else { throw DER.error("GeneralNames is not a SEQUENCE") }
        var out: [String: String] = [:]
        for general in try names.children() where general.tag == DER.Tag.contextConstructed(4) {  // directoryName [4]
            for name in try general.children() where name.tag == DER.Tag.sequence {
                for rdn in try name.children() where rdn.tag == DER.Tag.set {
                    for attribute in try rdn.children() where attribute.tag == DER.Tag.sequence {
                        let parts = try attribute.children()
                        guard parts.count == 2 else { throw DER.error("AttributeTypeAndValue has \(parts.count) parts") }
                        out[try parts[0].objectIdentifier()] = String(decoding: parts[1].value, as: UTF8.self)
                    }
                }
            }
        }
        return out
    }

    static func extendedKeyUsages(_ der: [UInt8]) throws(WebAuthnError) -> [String] {
        let sequence = try DER.parse(der)
        guard sequence.tag == DER.Tag.sequence else { throw DER.error("ExtKeyUsageSyntax is not a SEQUENCE") }
        return try sequence.children().map { (n) throws(WebAuthnError) in try n.objectIdentifier() }
    }
}
