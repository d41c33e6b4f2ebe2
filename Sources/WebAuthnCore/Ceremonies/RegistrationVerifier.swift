internal import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The registration ceremony's verification (WebAuthn L3 §7.1), as a pure
/// function of its inputs: no I/O, no store. Steps run in spec order, each a
/// named function. The caller (``WebAuthnEngine`` or your own code) supplies
/// the pending ceremony and stores the result.
public enum RegistrationVerifier {
    @inline(never) static func step(_ n: Int) -> String { "WebAuthn L3 §7.1 step \(n)" }

    /// Verifies a registration response against the ceremony it answers.
    ///
    /// - Parameters:
    ///   - response: the decoded client response.
    ///   - ceremony: what the relying party asked for (challenge, algorithms, UV).
    ///   - rp: the relying party (`relyingParty:`): RP ID, origins, policy and clock.
    ///   - binding: the binding of the session presenting the response, for a ceremony that has
    ///     one (`session_mismatch` when it differs or is missing).
    /// - Returns: what was verified, with the credential record to store.
    ///
    /// The ceremony is refused past its `expiresAt` on the relying party's clock
    /// (`challenge_expired`), as ``WebAuthnEngine`` refuses it. That the challenge is used once,
    /// and that the credential ID is not registered yet (step 27), is the caller's.
    public static func verify(
        _ response: RegistrationResponse, ceremony: PendingCeremony, relyingParty rp: RelyingParty, binding: [UInt8]? = nil
    ) throws(WebAuthnError) -> RegistrationResult {
        try WebAuthnEngine.verifyUnexpired(ceremony, at: rp.clock.now())
        try WebAuthnEngine.verifyBinding(ceremony, presented: binding)
        return try verify(response, clientData: nil, ceremony: ceremony, relyingParty: rp)
    }

    /// `clientData`: the already parsed clientDataJSON, when the caller has it.
    static func verify(
        _ response: RegistrationResponse, clientData: CollectedClientData?, ceremony: PendingCeremony, relyingParty rp: RelyingParty
    ) throws(WebAuthnError) -> RegistrationResult {
        // Steps 5–6: decode and parse clientDataJSON.
        let c: CollectedClientData
        if let clientData { c = clientData } else { c = try CollectedClientData(bytes: response.clientDataJSON) }
        try ClientDataChecks.verifyType(c, expected: "webauthn.create", step: step(7))
        try ClientDataChecks.verifyChallenge(c, expected: ceremony.challenge, step: step(8))
        try ClientDataChecks.verifyOrigin(c, rp: rp, step: step(9))
        try ClientDataChecks.verifyCrossOrigin(c, policy: rp.policy.crossOrigin, step: step(10))
        try ClientDataChecks.verifyTopOrigin(c, policy: rp.policy.crossOrigin, step: step(11))
        // Step 12: hash of the serialized client data.
        let clientDataHash = Digest.sha256(response.clientDataJSON)
        // Step 13: CBOR-decode the attestation object.
        let attestation = try AttestationObject(bytes: response.attestationObject)
        let authData = attestation.authenticatorData
        let credential = try verifyAttestedCredentialDataPresent(authData, response: response)
        try AuthenticatorDataChecks.verifyRpIdHash(authData, rp: rp, step: step(14))
        try AuthenticatorDataChecks.verifyUserPresent(authData, conditionalCreate: ceremony.conditionalCreate, step: step(15))
        try AuthenticatorDataChecks.verifyUserVerified(authData, requirement: effectiveUserVerification(ceremony, rp), step: step(16))
        try AuthenticatorDataChecks.verifyBackupFlags(authData, step: step(17))
        // Steps 18–19 (use BE/BS in policy): reported in the result.
        try verifyAlgorithmRequested(credential.publicKey.algorithm, ceremony: ceremony, policy: rp.policy)
        // Step 21 (extension outputs): the authenticator's outputs are a well-formed
        // map (checked while parsing); those with server-side meaning are checked
        // against what the options asked for, and recorded.
        let properties = try verifyExtensionOutputs(authData, response: response, ceremony: ceremony, policy: rp.policy)
        let verifier = try AttestationFormats.verifier(for: attestation.format)  // step 22
        let verification = try verifier.verify(
            AttestationInput(  // step 23
                statement: attestation.statement, authenticatorData: authData, clientDataHash: clientDataHash, policy: rp.policy,
                now: rp.clock.now()))
        // Steps 24–25, for each statement of a compound one, under its own format: every one must
        // pass, and the first untrusted one, if any, is what the result reports.
        let statements = verification.statements.isEmpty ? [(format: attestation.format, verification: verification)] : verification.statements
        var assessed: [(trust: AttestationTrust, type: AttestationType)] = []
        for (i, statement) in statements.enumerated() {
            do {
                assessed.append(try assessTrustworthiness(statement.verification, format: statement.format, aaguid: credential.aaguid, rp: rp))
            } catch  where statements.count > 1 {
                throw WebAuthnError(error.code, "compound statement \(i) (\(statement.format)): \(error.message)", step: error.step)
            }
        }
        let (trust, attestationType) = assessed.first { !$0.trust.trusted } ?? assessed.first { $0.type.presentsCertificateChain } ?? assessed[0]
        // Kept for later audits: the reported chain first, then the other statements' certificates
        // (a compound one's): a compromise reported later for any of their keys flags the
        // credential (the re-check of round 28: only one statement's chain was kept).
        var kept = trust.certificateChain.map(\.der)
        for other in assessed { for certificate in other.trust.certificateChain where !kept.contains(certificate.der) { kept.append(certificate.der) } }
        try verifyCredentialIdLength(credential.credentialId)  // step 26
        // Step 27 (not yet registered) needs the store: WebAuthnEngine checks it, atomically.

        guard let user = ceremony.user else {
            throw WebAuthnError(.ceremonyMismatch, "the pending ceremony has no user; it was not started as a registration")
        }
        var risks: Set<RiskSignal> = []
        if !trust.trusted && attestationType.presentsCertificateChain { risks.insert(.attestationUntrusted) }
        if !authData.userVerified { risks.insert(.userNotVerified) }
        let record = CredentialRecord(  // step 28: the record to store
            id: credential.credentialId, userHandle: user.id, publicKey: credential.publicKey,
            signCount: authData.signCount, transports: response.transports, uvInitialized: authData.userVerified,
            backupEligible: authData.backupEligible, backupState: authData.backedUp, aaguid: credential.aaguid,
            attestationFormat: attestation.format, createdAt: rp.clock.now(), properties: properties,
            attestationChain: Array(kept.prefix(8)))
        return RegistrationResult(
            credential: record, format: attestation.format, attestationType: attestationType, trust: trust,
            flags: authData.flags, signCount: authData.signCount, userVerified: authData.userVerified,
            backupEligible: authData.backupEligible, backedUp: authData.backedUp,
            authenticatorExtensions: authData.extensions, clientExtensionResults: response.clientExtensionResults.sanitizedOutputs(),
            riskSignals: risks)
    }

    static func effectiveUserVerification(_ ceremony: PendingCeremony, _ rp: RelyingParty) -> UserVerificationRequirement {
        rp.policy.userVerification == .required ? .required : ceremony.userVerification
    }

    /// Step 13 (cont.): registration authenticator data must carry attested
    /// credential data, and its credential ID must be the one the client reported.
    static func verifyAttestedCredentialDataPresent(_ authData: AuthenticatorData, response: RegistrationResponse) throws(WebAuthnError)
        -> AttestedCredentialData
    {
        guard let credential = authData.attestedCredentialData else {
            throw WebAuthnError(.attestedCredentialDataMissing, "the AT flag is not set: registration authenticator data has no credential", step: step(13))
        }
        guard credential.credentialId == response.id else {
            throw WebAuthnError(
                .credentialIdMismatch,
                "the credential id the client reported (\(Base64URL.encode(response.id).prefix(96))) differs from the one in authenticator data (\(Base64URL.encode(credential.credentialId).prefix(96)))",
                step: step(13))
        }
        return credential
    }

    /// Step 21: the extension outputs and requested properties with server-side meaning.
    /// credProtect, when the options enforced a level, must be at least that level;
    /// `credProps.rk: false` when a discoverable credential was required is refused
    /// (or recorded, per policy); the rest (attachment, PRF, large blob, minimum PIN
    /// length) is recorded. Client outputs decide nothing else: they are not signed.
    static func verifyExtensionOutputs(
        _ authData: AuthenticatorData, response: RegistrationResponse, ceremony: PendingCeremony, policy: VerificationPolicy
    ) throws(WebAuthnError) -> CredentialProperties {
        let outputs = response.clientExtensionResults
        let protection = try ExtensionChecks.reportedCredentialProtection(authData.extensions)
        try ExtensionChecks.verifyCredentialProtection(reported: protection, requested: ceremony.credentialProtection)
        let discoverable = try ExtensionChecks.verifyDiscoverable(
            reported: try ExtensionChecks.reportedDiscoverable(outputs), required: ceremony.residentKey == .required,
            refuse: policy.refuseNonDiscoverableWhenRequired)
        return CredentialProperties(
            discoverable: discoverable, authenticatorAttachment: response.authenticatorAttachment, credentialProtection: protection,
            prfEnabled: try ExtensionChecks.reportedFlag(outputs, "prf", "enabled"),
            largeBlobSupported: try ExtensionChecks.reportedFlag(outputs, "largeBlob", "supported"),
            minPinLength: try ExtensionChecks.reportedMinPinLength(authData.extensions))
    }

    /// Step 20: the credential key's alg is one of `pubKeyCredParams`.
    static func verifyAlgorithmRequested(_ alg: COSEAlgorithm, ceremony: PendingCeremony, policy: VerificationPolicy) throws(WebAuthnError) {
        let requested = ceremony.algorithms.isEmpty ? policy.algorithms : ceremony.algorithms
        guard requested.contains(alg) else {
            throw WebAuthnError(
                .algorithmNotAllowed, "the credential's algorithm \(alg) was not requested; pubKeyCredParams offered \(requested.map(\.name))", step: step(20))
        }
        if alg == .rs1 && !policy.allowInsecureRS1 {
            throw WebAuthnError(.algorithmNotAllowed, "RS1 (SHA-1) credentials are refused; VerificationPolicy.allowInsecureRS1 enables them", step: step(20))
        }
    }

    /// Steps 24–25 (and 29): obtain the trust anchors for this authenticator
    /// (format roots and its FIDO metadata entry) and assess the attestation.
    /// Expired or revoked certificates always fail; a chain that does not
    /// lead to an anchor is reported untrusted, and fails only when the
    /// policy requires trusted attestation.
    ///
    /// The AAGUID in authenticator data is a claim. It counts as verified only
    /// when the chain leads to a root of that AAGUID's own metadata entry (for
    /// U2F, the entry of the certificate's key identifier): only then is the
    /// entry attached to the result and used to refine the type, and only then
    /// does `allowedAAGUIDs` admit it. A format's built-in roots (Google's for
    /// `android-key`, Apple's) make a chain trusted, never a model verified.
    /// A claim that is not proven can still refuse: the deny list applies to
    /// it, and so do the objections of the entry it names.
    static func assessTrustworthiness(
        _ v: AttestationVerification, format: AttestationFormat, aaguid: AAGUID, rp: RelyingParty
    ) throws(WebAuthnError) -> (AttestationTrust, AttestationType) {
        let policy = rp.policy.attestation
        let anchors = rp.trustAnchors
        let claimed = anchors.entry(aaguid: aaguid, attestationCertificate: v.trustPath.first)
        try verifyAAGUIDListed(aaguid, policy: policy)
        let now = rp.clock.now()
        for (i, cert) in v.trustPath.enumerated() {
            try cert.checkValidity(at: now, role: i == 0 ? "the attestation certificate" : "x5c[\(i)]")
        }
        let anchoring = try anchorChain(v, format: format, claimed: claimed, anchors: anchors, at: now)
        let proven: MetadataEntry? = if case .metadataRoots = anchoring { claimed } else { nil }
        let type = refinedType(v.type, entry: proven)
        guard policy.acceptedTypes.contains(type) else {
            throw WebAuthnError(
                .attestationTypeNotAllowed, "attestation type \(type.rawValue) is not accepted; accepted: \(policy.acceptedTypes.map(\.rawValue).sorted())",
                step: step(25))
        }
        try verifyAAGUIDProven(aaguid, proven: proven != nil, type: type, policy: policy)
        var entryObjection = try metadataObjection(v.type, claimed: claimed, policy: policy, at: now)
        if entryObjection == nil {
            entryObjection = try keyCompromiseObjection(
                anchoring.path ?? v.trustPath, anchored: anchoring.path != nil, anchors: anchors, policy: policy, at: now)
        }
        if let formatObjection = v.objection, policy.requireTrustedAttestation, anchoring.reachedARoot {
            throw WebAuthnError(.attestationUntrusted, "the \(format) attestation is not trusted: \(formatObjection)", step: step(25))
        }
        let objection = entryObjection ?? v.objection
        switch anchoring {
        case .noChain:
            let reason = type == .none ? "no attestation was provided" : "self attestation: the credential key signed its own attestation"
            return (AttestationTrust(trusted: false, reason: objection ?? reason, certificateChain: [], metadata: nil), type)
        case .metadataRoots(let path), .formatRoots(let path):
            if let objection {
                return (AttestationTrust(trusted: false, reason: "the chain is valid but \(objection)", certificateChain: path, metadata: proven), type)
            }
            let source =
                proven.map { "FIDO metadata (\($0.description)); the AAGUID is verified" }
                ?? "the \(format) roots, which vouch for no particular model: the AAGUID is not verified"
            return (AttestationTrust(trusted: true, reason: "the chain leads to a root from \(source)", certificateChain: path, metadata: proven), type)
        case .unanchored(let error):
            if policy.requireTrustedAttestation {
                throw WebAuthnError(.attestationUntrusted, "the attestation certificate chain is not trusted: \(error.message)", step: step(25))
            }
            return (
                AttestationTrust(
                    trusted: false, reason: objection.map { "\(error.message); \($0)" } ?? error.message,
                    certificateChain: v.trustPath, metadata: nil), type
            )
        }
    }

    /// Where an attestation's certificate chain leads.
    enum ChainAnchoring {
        /// none or self attestation: no chain.
        case noChain
        /// The validated path passes through a root of the claimed metadata entry: the entry, and so its AAGUID, is proven.
        case metadataRoots([X509Certificate])
        /// The path leads only to a root of the format (`TrustAnchors.formatRoots`).
        case formatRoots([X509Certificate])
        /// No configured root: why.
        case unanchored(WebAuthnError)

        /// The validated path, from the attestation certificate to the root it reached (that root
        /// included, though the client need not send it).
        var path: [X509Certificate]? {
            switch self {
            case .metadataRoots(let path), .formatRoots(let path): return path
            case .noChain, .unanchored: return nil
            }
        }

        /// Whether the chain led to a configured root (an unanchored one has its own error).
        var reachedARoot: Bool {
            switch self {
            case .metadataRoots, .formatRoots: return true
            case .noChain, .unanchored: return false
            }
        }
    }

    /// Step 25: validates the chain against the format's roots and the claimed
    /// entry's roots at once, then says which of them it reached. An expired or
    /// revoked certificate fails whatever the policy.
    static func anchorChain(
        _ v: AttestationVerification, format: AttestationFormat, claimed: MetadataEntry?, anchors: TrustAnchors, at now: Date
    ) throws(WebAuthnError) -> ChainAnchoring {
        guard v.type.presentsCertificateChain else { return .noChain }
        let entryRoots = claimed?.attestationRootCertificates ?? []
        switch CertificateChain.validate(v.trustPath, anchors: (anchors.formatRoots[format] ?? []) + entryRoots, crls: anchors.crls, at: now) {
        case .trusted(let path):
            let passesEntryRoot = path.contains { certificate in entryRoots.contains { $0.der == certificate.der } }
            return passesEntryRoot ? .metadataRoots(path) : .formatRoots(path)
        case .untrusted(let error):
            if error.code == .certificateExpired || error.code == .certificateRevoked {
                throw WebAuthnError(error.code, error.message, step: step(25))
            }
            return .unanchored(error)
        }
    }

    /// Step 25, policy: the AAGUID is not denied (a claim suffices to refuse)
    /// and, with an allow-list, is on it.
    static func verifyAAGUIDListed(_ aaguid: AAGUID, policy: AttestationPolicy) throws(WebAuthnError) {
        if policy.deniedAAGUIDs.contains(aaguid) || policy.allowedAAGUIDs.map({ !$0.contains(aaguid) }) == true {
            throw WebAuthnError(.aaguidNotAllowed, "authenticator AAGUID \(aaguid) is not allowed by policy", step: step(25))
        }
    }

    /// Step 25, policy: `allowedAAGUIDs` admits only an AAGUID the attestation
    /// proves (its chain leads to a root of that AAGUID's metadata entry).
    static func verifyAAGUIDProven(_ aaguid: AAGUID, proven: Bool, type: AttestationType, policy: AttestationPolicy) throws(WebAuthnError) {
        guard policy.allowedAAGUIDs != nil, !proven else { return }
        let why =
            type.presentsCertificateChain
            ? "its certificate chain does not lead to a root of that AAGUID's FIDO metadata entry"
            : "\(type.rawValue) attestation proves no AAGUID"
        throw WebAuthnError(.aaguidUnverified, "authenticator AAGUID \(aaguid) is on the allow-list but unverified: \(why)", step: step(25))
    }

    /// Step 25: what the claimed FIDO metadata entry says against this
    /// attestation: a type the entry does not list (the response is not from
    /// the authenticator it names), or a compromised status in effect at `now`
    /// (the latest report whose effective date has come; one dated later does not
    /// apply yet). Fatal when trust is required; otherwise the reason the
    /// attestation is reported untrusted.
    static func metadataObjection(
        _ rawType: AttestationType, claimed: MetadataEntry?, policy: AttestationPolicy, at now: Date
    ) throws(WebAuthnError) -> String? {
        guard let entry = claimed else { return nil }
        var objection: String?
        let type = refinedType(rawType, entry: entry)
        if let listed = type.metadataName, !entry.attestationTypes.isEmpty, !entry.attestationTypes.contains(listed) {
            let reason = "FIDO metadata for \(entry.description) lists attestation types \(entry.attestationTypes), not \(listed)"
            if policy.requireTrustedAttestation { throw WebAuthnError(.attestationTypeNotAllowed, reason, step: step(25)) }
            objection = reason
        }
        if let status = entry.status(at: now), status.isCompromised {
            if policy.requireTrustedAttestation {
                throw WebAuthnError(.authenticatorCompromised, "FIDO metadata reports \(entry.description) as \(status)", step: step(25))
            }
            objection = objection ?? "metadata reports the authenticator as \(status)"
        }
        return objection
    }

    /// Step 25: a certificate of the chain whose key FIDO metadata reports compromised, under
    /// whichever entry names it (its U2F key identifier, or a report's certificate): whoever holds
    /// a leaked attestation key chooses the AAGUID it claims, and sibling models often share a
    /// root (red team, round 28). The chain is the validated path when it reached a root, the
    /// root included: a leaked CA key mints new leaves, and the client need not send the CA's
    /// certificate (re-check of round 28: a batch CA listed as a root and reported compromised
    /// was never looked up, and fido-u2f sends its leaf alone). Fatal when trust is required; otherwise the reason the
    /// attestation is reported untrusted.
    static func keyCompromiseObjection(
        _ chain: [X509Certificate], anchored: Bool, anchors: TrustAnchors, policy: AttestationPolicy, at now: Date
    ) throws(WebAuthnError) -> String? {
        for (i, certificate) in chain.enumerated() {
            guard let (report, description) = anchors.compromise(ofKeyOf: certificate, at: now) else { continue }
            let status = report.status
            let role =
                i == 0 ? "the attestation certificate" : i == chain.count - 1 && anchored ? "the root the chain leads to" : "certificate \(i) of the chain"
            if policy.requireTrustedAttestation {
                throw WebAuthnError(.authenticatorCompromised, "FIDO metadata reports the key of \(role) as \(status) (\(description))", step: step(25))
            }
            return "metadata reports the key of \(role) as \(status)"
        }
        return nil
    }

    /// Basic and AttCA share one data structure (§6.5.3); metadata that lists
    /// only `attca` for this authenticator says which one it is.
    static func refinedType(_ type: AttestationType, entry: MetadataEntry?) -> AttestationType {
        guard type == .basic, let types = entry?.attestationTypes, types.contains("attca"), !types.contains("basic_full") else { return type }
        return .attca
    }

    /// Step 26: credential IDs are at most 1023 bytes.
    static func verifyCredentialIdLength(_ id: [UInt8]) throws(WebAuthnError) {
        guard id.count <= AuthenticatorData.Layout.maxCredentialIdLength else {
            throw WebAuthnError(.credentialIdTooLong, "credential ID is \(id.count) bytes; at most 1023 are allowed", step: step(26))
        }
    }
}
