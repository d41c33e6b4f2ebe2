internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `apple` anonymous attestation statement format (WebAuthn L3 §8.8).
enum AppleAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.apple
    static let step = "WebAuthn L3 §8.8"

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        try AttestationFormats.checkMembers(input.statement, allowed: ["x5c", "alg"], format: identifier, step: step)
        // Step 1: x5c.
        guard let x5c = input.statement["x5c"] else {
            throw WebAuthnError(.attestationStatementMalformed, "apple attStmt needs x5c", step: step)
        }
        let certificates = try AttestationFormats.certificates(x5c, format: identifier)
        let credCert = certificates[0]
        // Steps 2–3: nonce = SHA-256(authenticatorData ‖ clientDataHash).
        let nonce = Digest.hash(.sha256, parts: input.signedData)
        // Step 4: the nonce extension holds Sequence { [1] OCTET STRING nonce }.
        guard let ext = try credCert.extension(oid: X509Certificate.OID.appleNonce) else {
            throw WebAuthnError(
                .attestationCertificateInvalid, "the apple credential certificate has no nonce extension (\(X509Certificate.OID.appleNonce))",
                step: step + " step 4")
        }
        let certNonce = try Self.nonce(from: ext.value)
        guard certNonce == nonce else {
            throw WebAuthnError(
                .attestationNonceMismatch,
                "the certificate nonce is \(Bytes.hex(certNonce)); expected SHA-256(authData ‖ clientDataHash) = \(Bytes.hex(nonce))", step: step + " step 4")
        }
        // Step 5: the credential public key is the certificate's subject public key.
        try AttestationFormats.checkSameKey(certificate: credCert, credential: input.credential.publicKey, step: step + " step 5")
        // Step 6: Anonymization CA, trust path x5c.
        return AttestationVerification(type: .anonca, trustPath: certificates)
    }

    static func nonce(from value: [UInt8]) throws(WebAuthnError) -> [UInt8] {
        let sequence = try DER.parse(value)
        guard sequence.tag == DER.Tag.sequence, let tagged = try sequence.children().first, tagged.tag == DER.Tag.contextConstructed(1),
            let octets = try tagged.children().first, octets.tag == DER.Tag.octetString, octets.contents.count == 32
        else {
            throw WebAuthnError(.attestationCertificateInvalid, "the apple nonce extension is not Sequence { [1] OCTET STRING (32 bytes) }", step: step)
        }
        return Array(octets.value)
    }
}
