internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `packed` attestation statement format (WebAuthn L3 §8.2): full
/// attestation with an x5c chain, or self attestation with the credential key.
enum PackedAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.packed

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        let statement = input.statement
        // Step 1: attStmt is valid CBOR of the packed syntax.
        try AttestationFormats.checkMembers(statement, allowed: ["alg", "sig", "x5c"], format: identifier, step: "WebAuthn L3 §8.2")
        let (alg, sig) = try AttestationFormats.algorithmAndSignature(statement, format: identifier)
        try AttestationFormats.checkAlgorithmAllowed(alg, policy: input.policy)

        if let x5c = statement["x5c"] {
            return try verifyFull(input, alg: alg, sig: sig, certificates: AttestationFormats.certificates(x5c, format: identifier))
        }
        return try verifySelf(input, alg: alg, sig: sig)
    }

    /// Step 2: x5c is present (Basic or AttCA attestation).
    static func verifyFull(_ input: AttestationInput, alg: COSEAlgorithm, sig: [UInt8], certificates: [X509Certificate]) throws(WebAuthnError)
        -> AttestationVerification
    {
        let leaf = certificates[0]
        let key = try leaf.publicKey()
        guard key.accepts(alg) else {
            throw WebAuthnError(
                .attestationStatementMalformed, "attStmt.alg \(alg) does not fit the attestation certificate's \(key.kind) key", step: "WebAuthn L3 §8.2 step 2"
            )
        }
        try verifySignature(key, alg: alg, sig: sig, input: input, which: "the attestation certificate's key")
        try checkCertificateRequirements(leaf)
        try checkAAGUIDExtension(leaf, aaguid: input.credential.aaguid)
        return AttestationVerification(type: .basic, trustPath: certificates)
    }

    /// Step 3: x5c is absent (self attestation).
    static func verifySelf(_ input: AttestationInput, alg: COSEAlgorithm, sig: [UInt8]) throws(WebAuthnError) -> AttestationVerification {
        let credentialKey = input.credential.publicKey
        guard alg == credentialKey.algorithm else {
            throw WebAuthnError(
                .attestationStatementMalformed, "self attestation alg is \(alg) but the credential key's alg is \(credentialKey.algorithm)",
                step: "WebAuthn L3 §8.2 step 3")
        }
        try verifySignature(credentialKey.publicKey, alg: alg, sig: sig, input: input, which: "the credential public key")
        return AttestationVerification(type: .self, trustPath: [])
    }

    static func verifySignature(_ key: PublicKey, alg: COSEAlgorithm, sig: [UInt8], input: AttestationInput, which: String) throws(WebAuthnError) {
        guard key.verify(signature: sig, parts: input.signedData, algorithm: alg) else {
            throw WebAuthnError(
                .attestationSignatureInvalid, "the packed attestation signature does not verify with \(which) (\(alg))", step: "WebAuthn L3 §8.2")
        }
    }

    /// §8.2.1 Certificate Requirements for Packed Attestation Statements.
    static func checkCertificateRequirements(_ cert: X509Certificate) throws(WebAuthnError) {
        let step = "WebAuthn L3 §8.2.1"
        guard cert.version == 3 else {
            throw WebAuthnError(.attestationCertificateInvalid, "attestation certificate version is \(cert.version); expected 3", step: step)
        }
        let ou = cert.subjectValues("OU")
        guard ou == ["Authenticator Attestation"] else {
            throw WebAuthnError(.attestationCertificateInvalid, "subject OU is \(ou); expected exactly \"Authenticator Attestation\"", step: step)
        }
        for attribute in ["C", "O", "CN"] {
            let values = cert.subjectValues(attribute)
            guard values.count == 1, !values[0].isEmpty else {
                throw WebAuthnError(
                    .attestationCertificateInvalid, "subject must have exactly one non-empty \(attribute); subject is \(cert.subjectSummary)", step: step)
            }
        }
        let country = cert.subjectValues("C")[0]
        guard country.utf8.count == 2, country.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else {
            throw WebAuthnError(.attestationCertificateInvalid, "subject C \"\(country)\" is not an ISO 3166 alpha-2 code", step: step)
        }
        guard let constraints = try cert.basicConstraints() else {
            throw WebAuthnError(.attestationCertificateInvalid, "the basic constraints extension is missing; it must be present with CA false", step: step)
        }
        guard !constraints.isCA else {
            throw WebAuthnError(.attestationCertificateInvalid, "basic constraints say CA true; an attestation certificate must have CA false", step: step)
        }
    }

    /// §8.2 step 2: if the certificate carries id-fido-gen-ce-aaguid, it must
    /// equal the AAGUID in authenticator data, and (§8.2.1) not be critical.
    static func checkAAGUIDExtension(_ cert: X509Certificate, aaguid: AAGUID) throws(WebAuthnError) {
        guard let ext = try cert.extension(oid: X509Certificate.OID.fidoGenCeAAGUID) else { return }
        guard !ext.critical else {
            throw WebAuthnError(.attestationCertificateInvalid, "the id-fido-gen-ce-aaguid extension must not be critical", step: "WebAuthn L3 §8.2.1")
        }
        // extnValue holds a DER OCTET STRING of 16 bytes: 04 10 <aaguid>.
        let value = ext.value, length = AuthenticatorData.Layout.aaguidLength
        guard value.count == 2 + length, value[0] == DER.Tag.octetString, Int(value[1]) == length,
            let certAAGUID = AAGUID(bytes: Array(value[2...]))
        else {
            throw WebAuthnError(
                .attestationCertificateInvalid, "the id-fido-gen-ce-aaguid extension is not an OCTET STRING of 16 bytes", step: "WebAuthn L3 §8.2.1")
        }
        guard certAAGUID == aaguid else {
            throw WebAuthnError(
                .attestationAAGUIDMismatch, "certificate AAGUID (\(X509Certificate.OID.fidoGenCeAAGUID)) is \(certAAGUID); authenticator data says \(aaguid)",
                step: "WebAuthn L3 §8.2 step 2")
        }
    }
}
