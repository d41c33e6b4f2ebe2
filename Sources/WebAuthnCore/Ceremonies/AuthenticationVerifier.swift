public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The authentication ceremony's verification (WebAuthn L3 §7.2), as a pure
/// function: the caller looks up the credential record and stores the
/// updated record from the result. Steps run in spec order.
public enum AuthenticationVerifier {
    @inline(never) static func step(_ n: Int) -> String { "WebAuthn L3 §7.2 step \(n)" }

    /// Verifies an assertion against its ceremony and the stored credential.
    ///
    /// - Parameters:
    ///   - response: the decoded client response.
    ///   - ceremony: what the relying party asked for (challenge, user, allowCredentials, UV).
    ///   - credential: the stored record whose ID is `response.id`.
    ///   - rp: the relying party (`relyingParty:`): RP ID, origins, policy and clock.
    ///   - binding: the binding of the session presenting the response, for a ceremony that has
    ///     one (`session_mismatch` when it differs or is missing).
    ///
    /// The ceremony is refused past its `expiresAt` on the relying party's clock
    /// (`challenge_expired`), as ``WebAuthnEngine`` refuses it (an adopter's review: the pure
    /// verifiers did not, and code keeping its own ceremonies took expired ones). That the
    /// challenge is used once, and the counter stored by compare-and-set, is the caller's.
    public static func verify(
        _ response: AuthenticationResponse, ceremony: PendingCeremony, credential: CredentialRecord,
        relyingParty rp: RelyingParty, binding: [UInt8]? = nil
    ) throws(WebAuthnError) -> AuthenticationResult {
        try WebAuthnEngine.verifyUnexpired(ceremony, at: rp.clock.now())
        try WebAuthnEngine.verifyBinding(ceremony, presented: binding)
        return try verify(response, clientData: nil, ceremony: ceremony, credential: credential, relyingParty: rp)
    }

    /// `clientData`: the already parsed clientDataJSON, when the caller has it.
    static func verify(
        _ response: AuthenticationResponse, clientData: CollectedClientData?, ceremony: PendingCeremony,
        credential: CredentialRecord, relyingParty rp: RelyingParty
    ) throws(WebAuthnError) -> AuthenticationResult {
        try verifyAllowedCredential(response.id, ceremony: ceremony)  // step 5
        try verifyCredentialOwner(response, ceremony: ceremony, credential: credential)  // step 6
        // Steps 7–9: decode and parse clientDataJSON.
        let c: CollectedClientData
        if let clientData { c = clientData } else { c = try CollectedClientData(bytes: response.clientDataJSON) }
        try ClientDataChecks.verifyType(c, expected: "webauthn.get", step: step(10))
        try ClientDataChecks.verifyChallenge(c, expected: ceremony.challenge, step: step(11))
        try ClientDataChecks.verifyOrigin(c, rp: rp, step: step(12))
        try ClientDataChecks.verifyCrossOrigin(c, policy: rp.policy.crossOrigin, step: step(13))
        try ClientDataChecks.verifyTopOrigin(c, policy: rp.policy.crossOrigin, step: step(14))
        let authData = try AuthenticatorData(bytes: response.authenticatorData)
        let usedAppID = try verifyRpIdHash(authData, ceremony: ceremony, credential: credential, rp: rp)  // step 15
        try AuthenticatorDataChecks.verifyUserPresent(authData, conditionalCreate: false, step: step(16))  // always, whatever the mediation
        let uvRequirement: UserVerificationRequirement = rp.policy.userVerification == .required ? .required : ceremony.userVerification
        try AuthenticatorDataChecks.verifyUserVerified(authData, requirement: uvRequirement, step: step(17))
        try AuthenticatorDataChecks.verifyBackupFlags(authData, step: step(18))
        try verifyBackupEligibilityUnchanged(authData, credential: credential)  // step 19
        try verifySignature(response, authData: authData, credential: credential, policy: rp.policy)  // steps 20–21
        let (newCount, counterRisk) = try verifySignCount(authData.signCount, stored: credential.signCount, policy: rp.policy.counter)  // step 22
        // Step 23 (extension outputs): the authenticator's, a well-formed map, checked while parsing; the
        // client's, only the known outputs kept (`sanitizedOutputs`); both returned for the caller to process.

        try verifyFlagPolicy(credential, policy: rp.policy.flaggedCredentials)
        var risks: Set<RiskSignal> = []
        if counterRisk { risks.insert(.possibleClonedAuthenticator) }
        if credential.flag != nil { risks.insert(.authenticatorCompromised) }
        if authData.backedUp != credential.backupState { risks.insert(.backupStateChanged) }
        if !authData.userVerified { risks.insert(.userNotVerified) }
        // Step 24: the updated credential record. (Assertion-time attestation, once a step between the
        // counter and this one, left L3 with w3c/webauthn#1997.)
        var updated = credential
        updated.signCount = newCount
        updated.backupState = authData.backedUp
        if authData.userVerified { updated.uvInitialized = true }
        updated.lastUsedAt = rp.clock.now()
        return AuthenticationResult(
            credentialId: credential.id, userHandle: credential.userHandle, signCount: authData.signCount,
            previousSignCount: credential.signCount, usedAppID: usedAppID, flag: credential.flag, flags: authData.flags, userVerified: authData.userVerified,
            backupEligible: authData.backupEligible, backedUp: authData.backedUp,
            authenticatorExtensions: authData.extensions, clientExtensionResults: response.clientExtensionResults.sanitizedOutputs(),
            riskSignals: risks, updatedCredential: updated)
    }

    /// Step 5: if allowCredentials was not empty, the credential is one of them.
    static func verifyAllowedCredential(_ id: [UInt8], ceremony: PendingCeremony) throws(WebAuthnError) {
        guard ceremony.allowCredentials.isEmpty || ceremony.allowCredentials.contains(id) else {
            throw WebAuthnError(.credentialNotAllowed, "credential \(Base64URL.encode(id).prefix(96)) is not in allowCredentials", step: step(5))
        }
    }

    /// Step 6: the credential belongs to the user being authenticated. With a
    /// user identified up front, the credential must be theirs and a returned
    /// userHandle must be their handle; in a discoverable login the userHandle
    /// is required and must be the credential owner's.
    static func verifyCredentialOwner(_ response: AuthenticationResponse, ceremony: PendingCeremony, credential: CredentialRecord) throws(WebAuthnError) {
        guard credential.id == response.id else {
            throw WebAuthnError(.credentialUnknown, "the credential record given is not the one the client used", step: step(6))
        }
        if let user = ceremony.userHandle {
            guard credential.userHandle == user else {
                throw WebAuthnError(
                    .credentialNotOwnedByUser, "the credential belongs to another user than the one this ceremony was started for", step: step(6))
            }
            if let handle = response.userHandle, handle != user {
                // The message names no handle: the account's would tell a caller whose account it is.
                throw WebAuthnError(
                    .userHandleMismatch, "response.userHandle is not the user handle of the account this ceremony was started for", step: step(6))
            }
        } else {
            guard let handle = response.userHandle else {
                throw WebAuthnError(.userHandleMissing, "a discoverable login needs response.userHandle, and it is absent", step: step(6))
            }
            guard handle == credential.userHandle else {
                // The message names no handle: the owner's would tell a caller whose credential it is.
                throw WebAuthnError(.userHandleMismatch, "response.userHandle is not the user handle of the credential's owner", step: step(6))
            }
        }
    }

    /// Step 15: rpIdHash is SHA-256 of the RP ID or, with the `appid` extension (L3
    /// §10.1.1), of the AppID the options offered: accepted only for a credential
    /// registered through U2F (`fido-u2f`), which is bound to the AppID it was made for.
    /// Returns whether the AppID was used.
    static func verifyRpIdHash(_ authData: AuthenticatorData, ceremony: PendingCeremony, credential: CredentialRecord, rp: RelyingParty)
        throws(WebAuthnError) -> Bool
    {
        if let appID = ceremony.appID, credential.attestationFormat == .fidoU2F, !Bytes.constantTimeEqual(authData.rpIdHash, rp.rpIdHash),
            Bytes.constantTimeEqual(authData.rpIdHash, Digest.sha256(Array(appID.utf8)))
        {
            return true
        }
        try AuthenticatorDataChecks.verifyRpIdHash(authData, rp: rp, step: step(15))
        return false
    }

    /// Policy, after the signature (so that it tells nothing to whoever lacks the key): a
    /// credential a re-audit flagged is refused under ``FlaggedCredentialPolicy/refuse``.
    static func verifyFlagPolicy(_ credential: CredentialRecord, policy: FlaggedCredentialPolicy) throws(WebAuthnError) {
        guard let flag = credential.flag, policy == .refuse else { return }
        throw WebAuthnError(.credentialFlagged, "the credential is flagged: \(flag.reason)")
    }

    /// Step 19: BE must equal the value recorded at registration.
    static func verifyBackupEligibilityUnchanged(_ authData: AuthenticatorData, credential: CredentialRecord) throws(WebAuthnError) {
        guard authData.backupEligible == credential.backupEligible else {
            throw WebAuthnError(
                .backupEligibilityChanged, "Backup Eligible (BE) is \(authData.backupEligible) but was \(credential.backupEligible) at registration",
                step: step(19))
        }
    }

    /// Steps 20–21: the signature over authenticatorData ‖ SHA-256(clientDataJSON)
    /// verifies with the credential public key.
    static func verifySignature(_ response: AuthenticationResponse, authData: AuthenticatorData, credential: CredentialRecord, policy: VerificationPolicy)
        throws(WebAuthnError)
    {
        let key = credential.publicKey
        if key.algorithm == .rs1 && !policy.allowInsecureRS1 {
            throw WebAuthnError(.algorithmNotAllowed, "RS1 (SHA-1) signatures are refused; VerificationPolicy.allowInsecureRS1 enables them", step: step(21))
        }
        let hash = Digest.sha256(response.clientDataJSON)  // step 20
        guard key.publicKey.verify(signature: response.signature, parts: [authData.bytes, hash], algorithm: key.algorithm) else {
            throw WebAuthnError(.signatureInvalid, "the assertion signature does not verify with the credential public key (\(key.algorithm))", step: step(21))
        }
    }

    /// Step 22: when either counter is non-zero the new one must be greater;
    /// otherwise the counter policy decides. Returns the counter to store and
    /// whether a possible clone was flagged.
    static func verifySignCount(_ received: UInt32, stored: UInt32, policy: CounterPolicy) throws(WebAuthnError) -> (UInt32, Bool) {
        guard received != 0 || stored != 0 else { return (0, false) }
        if received > stored { return (received, false) }
        switch policy {
        case .reject:
            throw WebAuthnError(
                .counterRegression, "sign counter is \(received); it must exceed the stored \(stored) (possible cloned authenticator)", step: step(22))
        case .acceptAndFlag:
            return (stored, true)
        }
    }
}
