internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `android-key` attestation statement format (WebAuthn L3 §8.4).
enum AndroidKeyAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.androidKey
    static let step = "WebAuthn L3 §8.4"
    /// KeyMint tags and values (Android key attestation schema).
    enum Tag { static let purpose = 1, allApplications = 600, origin = 702 }
    static let originGenerated = 0, purposeSign = 2

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        try AttestationFormats.checkMembers(input.statement, allowed: ["alg", "sig", "x5c"], format: identifier, step: step)
        // Step 1: alg, sig, x5c.
        let (alg, sig) = try AttestationFormats.algorithmAndSignature(input.statement, format: identifier)
        try AttestationFormats.checkAlgorithmAllowed(alg, policy: input.policy)
        guard let x5c = input.statement["x5c"] else {
            throw WebAuthnError(.attestationStatementMalformed, "android-key attStmt needs x5c", step: step)
        }
        let certificates = try AttestationFormats.certificates(x5c, format: identifier)
        let leaf = certificates[0]
        // Step 2: sig over authenticatorData ‖ clientDataHash with the leaf's key.
        let key = try leaf.publicKey()
        guard key.verify(signature: sig, parts: input.signedData, algorithm: alg) else {
            throw WebAuthnError(
                .attestationSignatureInvalid, "the android-key attestation signature does not verify with the certificate key (\(alg))", step: step + " step 2")
        }
        // Step 3: the leaf's key is the credential public key.
        try AttestationFormats.checkSameKey(certificate: leaf, credential: input.credential.publicKey, step: step + " step 3")
        // Step 4: the KeyDescription extension.
        guard let ext = try leaf.extension(oid: X509Certificate.OID.androidKeyDescription) else {
            throw WebAuthnError(
                .attestationCertificateInvalid, "the android-key certificate has no KeyDescription extension (\(X509Certificate.OID.androidKeyDescription))",
                step: step + " step 4")
        }
        let description = try KeyDescription(der: ext.value)
        guard description.attestationChallenge == input.clientDataHash else {
            throw WebAuthnError(
                .attestationNonceMismatch,
                "attestationChallenge is \(Bytes.hex(description.attestationChallenge)); expected clientDataHash \(Bytes.hex(input.clientDataHash))",
                step: step + " step 4")
        }
        guard !description.softwareEnforced.allApplications && !description.teeEnforced.allApplications else {
            throw WebAuthnError(.attestationCertificateInvalid, "the key is bound to all applications (allApplications is present)", step: step + " step 4")
        }
        try checkOriginAndPurpose(description, enforcement: input.policy.attestation.androidKeyEnforcement)
        // Step 5: Basic, trust path x5c.
        return AttestationVerification(type: .basic, trustPath: certificates)
    }

    /// §8.4 step 4: origin is KM_ORIGIN_GENERATED and purpose includes
    /// KM_PURPOSE_SIGN. With `.trustedExecutionEnvironment` the TEE-enforced
    /// list must state both. With `.teeOrSoftware` (the default) every value
    /// either list states must be right, and lists that state neither pass
    /// (the W3C spec's own vector has empty lists).
    static func checkOriginAndPurpose(_ d: KeyDescription, enforcement: AndroidKeyEnforcement) throws(WebAuthnError) {
        let lists = enforcement == .trustedExecutionEnvironment ? [d.teeEnforced] : [d.teeEnforced, d.softwareEnforced]
        let which = enforcement == .trustedExecutionEnvironment ? "TEE-enforced" : "TEE- or software-enforced"
        let origins = lists.compactMap(\.origin)
        if enforcement == .trustedExecutionEnvironment ? origins != [originGenerated] : origins.contains(where: { $0 != originGenerated }) {
            throw WebAuthnError(.attestationIntegrityFailed, "the \(which) key origin is \(origins); expected KM_ORIGIN_GENERATED (0)", step: step + " step 4")
        }
        let purposes = lists.flatMap(\.purposes)
        if enforcement == .trustedExecutionEnvironment ? !purposes.contains(purposeSign) : (!purposes.isEmpty && !purposes.contains(purposeSign)) {
            throw WebAuthnError(.attestationIntegrityFailed, "the \(which) key purposes \(purposes) do not include KM_PURPOSE_SIGN (2)", step: step + " step 4")
        }
    }

    struct AuthorizationList {
        var purposes: [Int] = []
        var allApplications = false
        var origin: Int?

        init(_ node: DER.Node) throws(WebAuthnError) {
            guard node.tag == DER.Tag.sequence else { throw DER.error("AuthorizationList is not a SEQUENCE") }
            var reader = DER(node.bytes, range: node.contents)
            var count = 0
            while !reader.atEnd {
                count += 1
                guard count <= 256 else { throw DER.error("AuthorizationList has too many entries") }
                let (entry, number) = try reader.taggedNext()
                guard entry.tag & DER.Tag.classMask == DER.Tag.contextSpecific else { continue }
                switch number {
                case Tag.purpose:
                    guard let set = try entry.children().first, set.tag == DER.Tag.set else { throw DER.error("purpose is not a SET") }
                    purposes = try set.children().map { (n) throws(WebAuthnError) in try n.integer() }
                case Tag.allApplications:
                    allApplications = true
                case Tag.origin:
                    guard let value = try entry.children().first else { throw DER.error("origin is empty") }
                    origin = try value.integer()
                default:
                    continue
                }
            }
        }
    }

    struct KeyDescription {
        let attestationChallenge: [UInt8]
        let softwareEnforced: AuthorizationList
        let teeEnforced: AuthorizationList

        init(der: [UInt8]) throws(WebAuthnError) {
            let root = try DER.parse(der)
            guard root.tag == DER.Tag.sequence else { throw DER.error("KeyDescription is not a SEQUENCE") }
            let fields = try root.children()
            guard fields.count >= 8, fields[4].tag == DER.Tag.octetString else {
                throw WebAuthnError(
                    .attestationCertificateInvalid, "KeyDescription has \(fields.count) fields; expected 8 with attestationChallenge an OCTET STRING",
                    step: AndroidKeyAttestation.step)
            }
            attestationChallenge = Array(fields[4].value)
            softwareEnforced = try AuthorizationList(fields[6])
            teeEnforced = try AuthorizationList(fields[7])
        }
    }
}
