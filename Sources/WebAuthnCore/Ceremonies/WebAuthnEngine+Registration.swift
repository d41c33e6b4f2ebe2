internal import Foundation
public import _WebAuthnEncoding

// Registration (WebAuthn L3 §7.1): the options, and the result verified and stored under the
// credential limit.
extension WebAuthnEngine {
    /// Starts a registration: issues a fresh challenge, remembers the ceremony
    /// and returns the options for `navigator.credentials.create()`. The
    /// user's existing credentials are listed in `excludeCredentials`.
    ///
    /// - Parameters:
    ///   - user: the account the credential is for.
    ///   - authenticatorSelection: which authenticators may answer; nil: any
    ///     attachment, a preferred discoverable credential, and the policy's
    ///     user verification.
    ///   - attestation: the attestation conveyance preference sent to the
    ///     client. Default `.none`.
    ///   - hints: hints for the client's UI (WebAuthn L3 §5.8.7), sent as given.
    ///   - attestationFormats: the attestation formats preferred, most preferred first
    ///     (`attestationFormats`, L3 §5.4), sent as given. Default none (the client chooses).
    ///   - extensions: extension inputs, sent as given. Default none. A credProtect
    ///     request (``ClientExtensions/requestCredentialProtection(_:enforce:)``) is kept
    ///     with the ceremony and, when enforced, checked against the authenticator data.
    ///   - newAccount: the registration creates `user` together with its first
    ///     credential (through ``accounts``), atomically, when it finishes; no
    ///     account or name exists before that. Its name and display name take their enforced
    ///     forms (``UserName/normalize(name:)``, ``UserName/normalize(displayName:)``), which the
    ///     options carry; a name without one is refused (`username_invalid`). A name already
    ///     taken is refused when the registration finishes (`username_unavailable`, the check that
    ///     holds under concurrency); look it up first (`accounts.account(named:)`) to tell the user
    ///     before they make a passkey, as `WebAuthnRoutes` does.
    ///   - addingToAccount: whether `user` is an account of the engine's account store (``accounts``),
    ///     which must then still exist when the credential is stored (`account_unknown` otherwise):
    ///     a registration must not store a credential for an account deleted meanwhile. True: the
    ///     caller found the account (pass it: a second read here could miss an account deleted since
    ///     the caller's, and the ceremony would escape the check); false: the host keeps this user
    ///     elsewhere; nil (the default): the engine reads the account store. Ignored with `newAccount`.
    ///   - conditionalCreate: the options are for a conditional create (an
    ///     automatic passkey upgrade of a signed-in account): the response may
    ///     lack user presence. Only the caller, who knows the account is signed
    ///     in, may decide this; it is never read from the response.
    ///   - binding: an opaque value of the session asking (e.g. a hash of its
    ///     cookie); the response must present the same (`session_mismatch`).
    ///   - challengeLength: the challenge's length in bytes, 16 to 64. Default 32.
    /// - Returns: the options, to send as ``CreationOptions/jsonString``.
    /// - Throws: `configuration_invalid` (challenge length, or a new account without an account store), `username_invalid` (a new account's
    ///   name or display name), `too_many_pending_ceremonies`,
    ///   `credential_limit_reached` (the user holds ``Limits/maxCredentialsPerUser``),
    ///   or `storage_failure` when a store fails.
    public func startRegistration(
        user: UserEntity,
        authenticatorSelection: AuthenticatorSelection? = nil,
        attestation: AttestationConveyancePreference = .none,
        hints: [PublicKeyCredentialHint] = [],
        attestationFormats: [AttestationFormat] = [],
        extensions: ClientExtensions = ClientExtensions(),
        newAccount: Bool = false,
        addingToAccount: Bool? = nil,
        conditionalCreate: Bool = false,
        binding: [UInt8]? = nil,
        challengeLength: Int = 32
    ) async throws(WebAuthnError) -> CreationOptions {
        // Refused here, before the user makes a passkey that could never be stored (it was refused
        // only at the finish: an adopter's review).
        if newAccount && accounts == nil {
            throw WebAuthnError(.configurationInvalid, "a registration that creates an account needs an engine with an account store")
        }
        let rp = configuredRelyingParty
        let selection = authenticatorSelection ?? AuthenticatorSelection(userVerification: rp.policy.userVerification)
        let challenge = try Self.newChallenge(length: challengeLength)
        // A new account's names are stored, shown and keyed: they take their enforced forms here,
        // whoever calls (an embedding's own route as much as the package's), or are refused.
        let user =
            newAccount
            ? try UserEntity(id: user.id, name: UserName.normalize(name: user.name), displayName: UserName.normalize(displayName: user.displayName)) : user
        let existing = newAccount ? [] : try await store { try await credentials.credentials(forUser: user.id) }
        try requireRoom(existing.count)
        // A credential for an account of the account store is stored only while that account exists.
        var addsToAccount = false
        if !newAccount, let accounts {
            if let addingToAccount {
                addsToAccount = addingToAccount
            } else {
                addsToAccount = try await store { try await accounts.account(handle: user.id) } != nil
            }
        }
        let ceremony = PendingCeremony(
            kind: .registration, challenge: challenge, user: user, algorithms: rp.policy.algorithms,
            userVerification: selection.userVerification, conditionalCreate: conditionalCreate, newAccount: newAccount, addsToAccount: addsToAccount,
            residentKey: selection.residentKey, authenticatorAttachment: selection.authenticatorAttachment,
            credentialProtection: extensions.credentialProtectionRequest,
            binding: binding, expiresAt: rp.clock.now().addingTimeInterval(rp.challengeLifetime))
        try await remember(ceremony)
        return CreationOptions(
            rpId: rp.id, rpName: rp.name, user: user, challenge: challenge, algorithms: rp.policy.algorithms,
            timeout: Int(rp.challengeLifetime * 1000),
            excludeCredentials: existing.map { CredentialDescriptor(id: $0.id, transports: $0.transports) },
            authenticatorSelection: selection, attestation: attestation, hints: hints, attestationFormats: attestationFormats,
            extensions: extensions)
    }

    /// Finishes a registration: verifies the response (WebAuthn L3 §7.1) and
    /// stores the new credential.
    ///
    /// When the challenge store is also the credential store and a ``SignInCommitting`` one,
    /// the ceremony is read with the credential ID's record, and the challenge consumed with the
    /// credential stored (and the account created, and `signingIn`'s session when its store is
    /// the same object) in one transaction: the result step is one read and one durable write.
    ///
    /// - Parameters:
    ///   - response: the client's response.
    ///   - expectedChallenge: the challenge bound to the client's session, if
    ///     the caller keeps one. Without it the ceremony is found by the
    ///     challenge in the client data.
    ///   - binding: the binding of the session presenting the response; it
    ///     must equal the one the ceremony was started with, if any.
    ///   - signingIn: a signed-in session to store with the registration, only if it succeeds. Default none.
    /// - Returns: what was verified, with the stored credential record.
    /// - Throws: the first failed check's code (`challenge_unknown`,
    ///   `challenge_expired`, `session_mismatch`, `origin_not_allowed`, ...; see
    ///   `Docs/Errors.md`), `credential_already_registered`, `username_unavailable`
    ///   (new accounts), `credential_limit_reached` (the user holds
    ///   ``Limits/maxCredentialsPerUser``), `account_unknown` (the user was an account of the
    ///   engine's account store when the registration started, and it was deleted since), or
    ///   `storage_failure`. Nothing is stored on failure.
    public func finishRegistration(
        _ response: RegistrationResponse, expectedChallenge: [UInt8]? = nil,
        binding: [UInt8]? = nil, signingIn: SessionSignIn<RegistrationResult>? = nil
    ) async throws(WebAuthnError) -> RegistrationResult {
        let rp = relyingParty  // one snapshot of the trust anchors for the whole ceremony
        let clientData = try CollectedClientData(bytes: response.clientDataJSON)
        // The credential ID read with the ceremony is the response's own (`rawId`), which step 27 checks against the stored ones.
        let (ceremony, read, committing) = try await pendingCeremony(
            for: clientData, kind: .registration, expected: expectedChallenge, binding: binding, credentialId: response.id)
        var result = try RegistrationVerifier.verify(response, clientData: clientData, ceremony: ceremony, relyingParty: rp)
        result.createdAccount = ceremony.newAccount
        let record = result.credential
        // §7.1 step 27: the credential ID is not yet registered for any user.
        var existing = read
        if committing == nil || response.id != record.id { existing = try await store { try await credentials.credential(id: record.id) } }
        if existing != nil {
            throw WebAuthnError(
                .credentialAlreadyRegistered, "credential \(Base64URL.encode(record.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
        var account: UserEntity?
        if ceremony.newAccount {
            guard accounts != nil, let user = ceremony.user else {
                throw WebAuthnError(.configurationInvalid, "a registration that creates an account needs an engine with an account store")
            }
            account = user
        }
        var session: SignedInSession?
        if let signingIn { session = try await store { try await signingIn.session(result) } }
        // One transaction where the store can (the session too, in the same store); else step by step.
        let together =
            committing != nil && (account == nil || (accounts as AnyObject) === (committing as AnyObject))
            && (signingIn.map { ($0.store as AnyObject) === (committing as AnyObject) } ?? false)
        // A credential added to an account of the engine's account store (it was one when the
        // ceremony started) needs the account to exist when it is stored: a registration started
        // before the account's deletion must not store a credential of no account after it (in the
        // commit's transaction where the account store is the committing store; else read just before).
        let sameStore = committing != nil && (accounts as AnyObject) === (committing as AnyObject)
        let addingToAccount = ceremony.addsToAccount && accounts != nil
        let commit = { [self, account, session] () async throws(WebAuthnError) -> Bool in
            if addingToAccount, !sameStore, let accounts, try await store({ try await accounts.account(handle: record.userHandle) }) == nil {
                throw accountDeleted
            }
            if let committing, account == nil || sameStore {
                return try await store {
                    if addingToAccount && sameStore {
                        return try await committing.commitRegistration(
                            consuming: ceremony.challenge, addingTo: record.userHandle, limit: limits.maxCredentialsPerUser, credential: record,
                            signingIn: together ? session : nil, replacing: together ? signingIn?.replacing : nil)
                    }
                    return try await committing.commitRegistration(
                        consuming: ceremony.challenge, creating: account, credential: record, signingIn: together ? session : nil,
                        replacing: together ? signingIn?.replacing : nil)
                }
            }
            let stepwise = StepwiseRegistration(challenges: challenges, credentials: credentials, accounts: accounts)
            return try await store { try await stepwise.commit(consuming: ceremony.challenge, creating: account, credential: record) }
        }
        let committed: Bool
        if ceremony.newAccount {
            committed = try await commit()
        } else {
            // Checked again here, and committed before another registration of the same user in
            // this process counts: ceremonies started before the user reached the limit (up to
            // `PendingCeremony.maxPerBinding` per session, in any number of sessions) must not
            // pass it. Where the store adds to an account in one transaction, it checks the limit
            // there too, for every process sharing it.
            committed = try await registrationsByUser.run(record.userHandle) { () async throws(WebAuthnError) -> Bool in
                try requireRoom(try await store { try await credentials.credentials(forUser: record.userHandle) }.count)
                return try await commit()
            }
        }
        guard committed else { throw Self.challengeTaken }
        housekeeping.release()
        if !together { try await storeSession(session, signingIn) }
        return result
    }

    /// Refuses a registration for a user who holds ``Limits/maxCredentialsPerUser`` credentials.
    private func requireRoom(_ held: Int) throws(WebAuthnError) {
        guard held < limits.maxCredentialsPerUser else { throw credentialLimit(held: held, limit: limits.maxCredentialsPerUser) }
    }

    /// Decodes a JSON request body (`RegistrationResponseJSON`) and finishes the
    /// registration; see ``finishRegistration(_:expectedChallenge:binding:signingIn:)``.
    public func finishRegistration(json: [UInt8], expectedChallenge: [UInt8]? = nil, binding: [UInt8]? = nil) async throws(WebAuthnError) -> RegistrationResult
    {
        try await finishRegistration(RegistrationResponse(json: json), expectedChallenge: expectedChallenge, binding: binding)
    }
}
