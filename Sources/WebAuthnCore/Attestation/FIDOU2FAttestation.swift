internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `fido-u2f` attestation statement format (WebAuthn L3 §8.6).
enum FIDOU2FAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.fidoU2F
    static let step = "WebAuthn L3 §8.6"
    /// The first byte of verificationData, reserved for future use (FIDO U2F raw message formats §4.3).
    static let reservedByte: UInt8 = 0x00

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        let statement = input.statement
        try AttestationFormats.checkMembers(statement, allowed: ["sig", "x5c"], format: identifier, step: step)
        // Step 1: x5c holds exactly one certificate; sig is a byte string.
        guard let x5c = statement["x5c"], let sig = statement["sig"]?.bytesValue, !sig.isEmpty else {
            throw WebAuthnError(.attestationStatementMalformed, "fido-u2f attStmt needs x5c and sig", step: step)
        }
        let certificates = try AttestationFormats.certificates(x5c, format: identifier, maxCertificates: 1)
        // Step 2: the attestation certificate's key is EC P-256.
        let key = try certificates[0].publicKey()
        guard key.kind == .ec(.p256) else {
            throw WebAuthnError(.attestationCertificateInvalid, "the fido-u2f attestation key is \(key.kind); it must be EC P-256", step: step + " step 2")
        }
        // A U2F client builds authenticator data with an all-zero AAGUID.
        let credential = input.credential
        guard credential.aaguid.isZero else {
            throw WebAuthnError(.attestationAAGUIDMismatch, "a fido-u2f attestation must come with an all-zero AAGUID; got \(credential.aaguid)", step: step)
        }
        // Step 3: the credential key as an uncompressed P-256 point (0x04 ‖ x ‖ y).
        let cose = credential.publicKey
        guard cose.keyType == .ec2, cose.algorithm == .es256, let point = cose.uncompressedPoint, point.count == ECCurve.p256.uncompressedPointSize else {
            throw WebAuthnError(
                .attestationStatementMalformed, "a fido-u2f credential key must be EC2 P-256 (ES256); got \(cose.algorithm)", step: step + " step 3")
        }
        // Step 4: verificationData = 0x00 ‖ rpIdHash ‖ clientDataHash ‖ credentialId ‖ publicKeyU2F.
        let verificationData: [[UInt8]] = [[reservedByte], input.authenticatorData.rpIdHash, input.clientDataHash, credential.credentialId, point]
        // Step 5: verify sig with the certificate's key (ECDSA P-256, SHA-256).
        guard key.verify(signature: sig, parts: verificationData, algorithm: .es256) else {
            throw WebAuthnError(.attestationSignatureInvalid, "the fido-u2f attestation signature does not verify", step: step + " step 5")
        }
        // Steps 6–7: Basic or AttCA, trust path x5c.
        return AttestationVerification(type: .basic, trustPath: certificates)
    }
}
