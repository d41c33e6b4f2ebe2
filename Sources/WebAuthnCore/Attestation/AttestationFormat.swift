internal import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// What an attestation statement verification procedure returns
/// (WebAuthn L3 §6.5.3): the attestation type and the trust path.
struct AttestationVerification: Sendable {
    let type: AttestationType
    /// x5c, leaf first; empty for `none` and self attestation.
    let trustPath: [X509Certificate]
    /// A `compound` statement's statements, each with its format: step 25 assesses every one.
    var statements: [(format: AttestationFormat, verification: AttestationVerification)] = []
    /// What the format itself says against trusting a statement that verified (a TPM key the TPM
    /// did not make): step 25 reports it untrusted, and refuses it when trust is required.
    var objection: String?
}

/// The inputs of a verification procedure.
struct AttestationInput {
    let statement: CBOR
    let authenticatorData: AuthenticatorData
    let clientDataHash: [UInt8]
    let policy: VerificationPolicy
    /// The engine's time (SafetyNet freshness).
    var now: Date = Date(timeIntervalSince1970: 0)

    /// attestedCredentialData is always present here (checked before).
    var credential: AttestedCredentialData { authenticatorData.attestedCredentialData! }

    /// `authenticatorData ‖ clientDataHash`, what most formats sign.
    var signedData: [[UInt8]] { [authenticatorData.bytes, clientDataHash] }
}

/// One attestation statement format (WebAuthn L3 §8). One file per format.
protocol AttestationFormatVerifier: Sendable {
    static var identifier: AttestationFormat { get }
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification
}

/// The formats this build verifies, and the one error for all others.
enum AttestationFormats {
    static let verifiers: [AttestationFormat: any AttestationFormatVerifier.Type] = [
        NoneAttestation.identifier: NoneAttestation.self,
        PackedAttestation.identifier: PackedAttestation.self,
        FIDOU2FAttestation.identifier: FIDOU2FAttestation.self,
        AppleAttestation.identifier: AppleAttestation.self,
        AndroidKeyAttestation.identifier: AndroidKeyAttestation.self,
        TPMAttestation.identifier: TPMAttestation.self,
        AndroidSafetyNetAttestation.identifier: AndroidSafetyNetAttestation.self,
        CompoundAttestation.identifier: CompoundAttestation.self,
    ]

    /// Formats registered with IANA that this build does not verify yet.
    static let knownUnsupported: Set<AttestationFormat> = []

    /// WebAuthn L3 §7.1 step 22: a USASCII case-sensitive match of `fmt`
    /// against the supported formats.
    static func verifier(for format: AttestationFormat) throws(WebAuthnError) -> any AttestationFormatVerifier.Type {
        // AttestationFormat compares UTF-8 bytes: a canonically equivalent name is another format.
        if let verifier = verifiers[format] { return verifier }
        let supported = verifiers.keys.map(\.rawValue).sorted().joined(separator: ", ")
        if knownUnsupported.contains(format) {
            throw WebAuthnError(
                .attestationFormatUnsupported, "attestation format \"\(format)\" is not supported by this build; supported: \(supported)",
                step: "WebAuthn L3 §7.1 step 22")
        }
        throw WebAuthnError(
            .attestationFormatUnsupported, "unknown attestation format \"\(format.rawValue.prefix(64))\"; supported: \(supported)",
            step: "WebAuthn L3 §7.1 step 22")
    }

    /// attStmt must be a map whose members are all among `allowed`.
    static func checkMembers(_ statement: CBOR, allowed: Set<String>, format: AttestationFormat, step: String) throws(WebAuthnError) {
        guard let pairs = statement.mapValue else {
            throw WebAuthnError(.attestationStatementMalformed, "the \(format) attStmt is not a map", step: step)
        }
        for pair in pairs {
            guard let key = pair.key.textValue, allowed.contains(where: { Bytes.sameUTF8($0, key) }) else {
                throw WebAuthnError(.attestationStatementMalformed, "unexpected \(format) attStmt member \(pair.key.keyDescription)", step: step)
            }
        }
    }

    /// Reads the alg/sig pair most formats carry.
    static func algorithmAndSignature(_ statement: CBOR, format: AttestationFormat) throws(WebAuthnError) -> (COSEAlgorithm, [UInt8]) {
        guard let alg = statement["alg"]?.intValue else {
            throw WebAuthnError(.attestationStatementMalformed, "\(format) attStmt.alg is missing or not an integer")
        }
        guard let sig = statement["sig"]?.bytesValue, !sig.isEmpty else {
            throw WebAuthnError(.attestationStatementMalformed, "\(format) attStmt.sig is missing or not a byte string")
        }
        return (COSEAlgorithm(alg), sig)
    }

    /// Reads an x5c array: 1 to `maxCertificates` DER certificates.
    static func certificates(_ value: CBOR, format: AttestationFormat, maxCertificates: Int = 8) throws(WebAuthnError) -> [X509Certificate] {
        guard let items = value.arrayValue, !items.isEmpty else {
            throw WebAuthnError(.attestationStatementMalformed, "\(format) attStmt.x5c is not a non-empty array")
        }
        guard items.count <= maxCertificates else {
            throw WebAuthnError(
                .attestationStatementMalformed, "\(format) attStmt.x5c has \(items.count) certificates; at most \(maxCertificates) are accepted")
        }
        var certificates: [X509Certificate] = []
        for (i, item) in items.enumerated() {
            guard let der = item.bytesValue else {
                throw WebAuthnError(.attestationStatementMalformed, "\(format) attStmt.x5c[\(i)] is not a byte string")
            }
            certificates.append(try X509Certificate(der: der))
        }
        return certificates
    }

    /// The certificate's subject public key must be the credential public key.
    static func checkSameKey(certificate: X509Certificate, credential: COSEKey, step: String) throws(WebAuthnError) {
        let certKey = try certificate.publicKey()
        guard certKey.subjectPublicKeyInfo == credential.publicKey.subjectPublicKeyInfo else {
            throw WebAuthnError(
                .attestationKeyMismatch,
                "the attestation certificate's public key (\(certKey.kind)) is not the credential public key (\(credential.publicKey.kind))", step: step)
        }
    }

    /// Whether an attestation signature algorithm is allowed by policy.
    static func checkAlgorithmAllowed(_ alg: COSEAlgorithm, policy: VerificationPolicy) throws(WebAuthnError) {
        guard COSEAlgorithm.supported.contains(alg) else {
            throw WebAuthnError(.algorithmUnsupported, "attestation algorithm \(alg) is not supported")
        }
        if alg == .rs1 && !policy.allowInsecureRS1 {
            throw WebAuthnError(.algorithmNotAllowed, "attestation algorithm RS1 (SHA-1) is refused; VerificationPolicy.allowInsecureRS1 enables it")
        }
    }
}
