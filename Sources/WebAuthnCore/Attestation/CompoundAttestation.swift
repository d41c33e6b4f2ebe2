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
        var results: [(format: AttestationFormat, verification: AttestationVerification)] = []
        for (i, item) in items.enumerated() {
            guard let format = item["fmt"]?.textValue.map(AttestationFormat.init(rawValue:)), let statement = item["attStmt"], item.mapValue?.count == 2 else {
                throw WebAuthnError(.attestationStatementMalformed, "compound statement \(i) is not {fmt, attStmt}", step: step)
            }
            guard format != identifier else {
                throw WebAuthnError(.attestationStatementMalformed, "compound statements cannot nest", step: step)
            }
            let verifier = try AttestationFormats.verifier(for: format)
            let verification = try verifier.verify(
                AttestationInput(
                    statement: statement, authenticatorData: input.authenticatorData, clientDataHash: input.clientDataHash,
                    policy: input.policy, now: input.now))
            results.append((format, verification))
        }
        // Step 25 assesses every statement, each under its own format's roots (red team, round 26:
        // only the first chain was, so an expired chain after a trusted one passed, and the
        // `apple` or `android-key` roots were looked up under `compound`). The first statement
        // that presents a chain stands for the whole in the result's type.
        let shown = results.first { $0.verification.type.presentsCertificateChain } ?? results[0]
        var whole = shown.verification
        whole.statements = results
        return whole
    }
}
