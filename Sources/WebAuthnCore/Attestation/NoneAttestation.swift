internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `none` attestation statement format (WebAuthn L3 §8.7).
enum NoneAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.none

    /// §8.7 verification procedure: attStmt must be the empty map; the
    /// attestation type is None and the trust path is empty.
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        guard input.statement.mapValue?.isEmpty == true else {
            throw WebAuthnError(.attestationStatementMalformed, "a \"none\" attestation statement must be an empty map", step: "WebAuthn L3 §8.7")
        }
        return AttestationVerification(type: .none, trustPath: [])
    }
}
