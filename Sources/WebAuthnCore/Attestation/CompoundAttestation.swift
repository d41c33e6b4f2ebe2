internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `compound` attestation statement format (WebAuthn L3 §8.9): a list of
/// attestation statements of other formats, each of which must verify.
enum CompoundAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.compound
    static let step = "WebAuthn L3 §8.9"
    static let maxStatements = 8

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        guard let items = input.statement.arrayValue, (2...maxStatements).contains(items.count) else {
            throw WebAuthnError(.attestationStatementMalformed, "a compound attStmt is an array of 2 to \(maxStatements) statements", step: step)
        }
        var results: [AttestationVerification] = []
        for (i, item) in items.enumerated() {
            guard let format = item["fmt"]?.textValue.map(AttestationFormat.init(rawValue:)), let statement = item["attStmt"], item.mapValue?.count == 2 else {
                throw WebAuthnError(.attestationStatementMalformed, "compound statement \(i) is not {fmt, attStmt}", step: step)
            }
            guard format != identifier else {
                throw WebAuthnError(.attestationStatementMalformed, "compound statements cannot nest", step: step)
            }
            let verifier = try AttestationFormats.verifier(for: format)
            results.append(
                try verifier.verify(
                    AttestationInput(
                        statement: statement, authenticatorData: input.authenticatorData, clientDataHash: input.clientDataHash,
                        policy: input.policy, now: input.now)))
        }
        // Trust is assessed on the first statement that presents a certificate chain.
        return results.first { $0.type.presentsCertificateChain } ?? results[0]
    }
}
