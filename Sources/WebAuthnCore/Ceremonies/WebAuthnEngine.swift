public import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The relying party's stateful API: start and finish registration and
/// authentication ceremonies against a credential store and a challenge store.
///
/// Verification never writes. A ceremony is committed only after every check
/// has passed: the challenge is consumed (exactly once, atomically) and then
/// the credential is inserted, or its counter compare-and-set. A failed
/// ceremony changes nothing stored; of two concurrent submissions of one
/// response, exactly one succeeds.
public struct WebAuthnEngine: Sendable {
    /// Who the engine verifies for: RP ID, origins, policies and clock, with the trust
    /// anchors installed now (those it was made with, until ``updateTrustAnchors(_:)``).
    /// A ceremony reads it once, so it finishes with the anchors it started with.
    public var relyingParty: RelyingParty {
        var rp = configuredRelyingParty
        rp.trustAnchors = installedTrustAnchors.withLock { $0 }
        return rp
    }
    /// The trust anchors new ceremonies use (see ``updateTrustAnchors(_:)``).
    public var trustAnchors: TrustAnchors { installedTrustAnchors.withLock { $0 } }
    let configuredRelyingParty: RelyingParty
    /// Shared by every copy of the engine: one swap reaches them all.
    let installedTrustAnchors: Locked<TrustAnchors>
    /// Where registered credentials are stored and looked up.
    public let credentials: any CredentialStore
    /// Where pending ceremonies wait for their response.
    public let challenges: any ChallengeStore
    /// Where new accounts are created with their first credential (registrations
    /// started with `newAccount: true`); nil: such registrations are refused.
    public let accounts: (any AccountStore)?
    /// Bounds on pending ceremonies and how often they are swept.
    public let limits: Limits
    let housekeeping = Housekeeping()
    /// Registrations to existing users, one at a time per user: the credential limit's count and
    /// the commit that depends on it do not interleave within this process.
    let registrationsByUser = KeyedSerializer<[UInt8]>()

    /// Bounds on what the engine keeps for clients that have not finished a ceremony.
    public struct Limits: Sendable {
        /// The most pending ceremonies kept (after sweeping expired ones); beyond
        /// it new ceremonies are refused with `too_many_pending_ceremonies`.
        /// Default 100,000.
        public var maxPendingCeremonies: Int
        /// How often expired ceremonies are swept, on the engine's clock. Default 10 s.
        public var sweepInterval: TimeInterval
        /// When ``maxPendingCeremonies`` are pending: drop those that expire first to make room
        /// (true, the default: a flood of options from many addresses shortens how long a
        /// ceremony waits instead of blocking everyone's), or refuse (`too_many_pending_ceremonies`).
        public var evictOldestWhenFull: Bool
        /// The most credentials one user may hold. A registration for a user who holds this many
        /// is refused with `credential_limit_reached`, when it starts and again before it is
        /// stored (so ceremonies started before the user reached the limit cannot pass it, but two
        /// finished at the same instant may). Every authentication by user handle lists all of a
        /// user's credentials, in its options and its pending ceremony: the limit bounds what one
        /// user costs. Default 32.
        public var maxCredentialsPerUser: Int

        /// Limits; values below the minimum are raised to it (1 ceremony, 0 seconds, 1 credential).
        ///
        /// - Parameters:
        ///   - maxPendingCeremonies: The most pending ceremonies kept. Default 100,000.
        ///   - sweepInterval: Seconds between sweeps of expired ceremonies. Default 10.
        ///   - evictOldestWhenFull: Whether a full engine drops the ceremonies that expire first. Default true.
        ///   - maxCredentialsPerUser: The most credentials one user may hold. Default 32.
        public init(
            maxPendingCeremonies: Int = 100_000, sweepInterval: TimeInterval = 10, evictOldestWhenFull: Bool = true,
            maxCredentialsPerUser: Int = 32
        ) {
            self.maxPendingCeremonies = max(1, maxPendingCeremonies)
            self.sweepInterval = max(0, sweepInterval)
            self.evictOldestWhenFull = evictOldestWhenFull
            self.maxCredentialsPerUser = max(1, maxCredentialsPerUser)
        }
    }

    /// An engine over the given stores.
    ///
    /// - Parameters:
    ///   - relyingParty: Who the engine verifies for.
    ///   - credentials: Where credentials are stored.
    ///   - challenges: Where pending ceremonies are kept.
    ///   - accounts: Where new accounts are created with their first credential;
    ///     nil refuses registrations started with `newAccount: true`.
    ///   - limits: Bounds on pending ceremonies.
    public init(
        relyingParty: RelyingParty, credentials: any CredentialStore, challenges: any ChallengeStore,
        accounts: (any AccountStore)? = nil, limits: Limits = Limits()
    ) {
        self.configuredRelyingParty = relyingParty
        self.installedTrustAnchors = Locked(relyingParty.trustAnchors)
        self.credentials = credentials
        self.challenges = challenges
        self.accounts = accounts
        self.limits = limits
    }

    /// An engine with in-memory stores (tests, demos).
    public init(relyingParty: RelyingParty) {
        let credentials = InMemoryCredentialStore()
        self.init(
            relyingParty: relyingParty, credentials: credentials,
            challenges: InMemoryChallengeStore(clock: relyingParty.clock), accounts: InMemoryAccountStore(credentials: credentials))
    }

    /// Installs new trust anchors (format roots, FIDO metadata, CRLs) atomically, for every
    /// copy of this engine: ceremonies that finish after the call use them, and one that
    /// has already begun finishing completes with the anchors it read. `MetadataService`
    /// calls it with each verified metadata BLOB.
    public func updateTrustAnchors(_ anchors: TrustAnchors) {
        installedTrustAnchors.withLock { $0 = anchors }
    }

    // MARK: Authentication

    /// Starts an authentication. With a user handle, the user's credentials
    /// are listed in `allowCredentials`; without one, the login is
    /// discoverable (usernameless) and the response must carry `userHandle`.
    /// User presence is required whatever mediation the page uses (L3 §7.2 step 16).
    ///
    /// - Parameters:
    ///   - userHandle: the account signing in; nil for a discoverable login.
    ///   - userVerification: the user verification to ask for; nil: the policy's.
    ///   - hints: hints for the client's UI (WebAuthn L3 §5.8.7), sent as given.
    ///   - extensions: extension inputs, sent as given, except an `appid` that is not the
    ///     policy's ``VerificationPolicy/u2fAppID`` (dropped). Default none.
    ///   - binding: an opaque value of the session asking; the response must present the same.
    ///   - allowCredentials: the descriptors to list, when the caller has
    ///     already looked up the user's credentials, or lists stand-ins for a
    ///     name that has none (L3 §14.6.2: the answer then looks like a real
    ///     account's, and any response to it fails). Nil: the engine looks up
    ///     `userHandle`'s credentials.
    ///   - challengeLength: the challenge's length in bytes, 16 to 64. Default 32.
    /// - Returns: the options, to send as ``RequestOptions/jsonString``.
    /// - Throws: `configuration_invalid` (challenge length), `too_many_pending_ceremonies`,
    ///   or `storage_failure` when a store fails.
    public func startAuthentication(
        userHandle: [UInt8]? = nil,
        userVerification: UserVerificationRequirement? = nil,
        hints: [PublicKeyCredentialHint] = [],
        extensions: ClientExtensions = ClientExtensions(),
        binding: [UInt8]? = nil,
        allowCredentials: [CredentialDescriptor]? = nil,
        challengeLength: Int = 32
    ) async throws(WebAuthnError) -> RequestOptions {
        let rp = configuredRelyingParty
        let challenge = try Self.newChallenge(length: challengeLength)
        var allowed: [CredentialDescriptor] = allowCredentials ?? []
        if let userHandle, allowCredentials == nil {
            let records = try await store { try await credentials.credentials(forUser: userHandle) }
            allowed = records.map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
        }
        let uv = userVerification ?? rp.policy.userVerification
        // appid (L3 §10.1.1): only the AppID the relying party configured.
        let appID = extensions.appID.flatMap { $0 == rp.policy.u2fAppID ? $0 : nil }
        let extensions = appID == nil ? extensions.removingAppID() : extensions
        let ceremony = PendingCeremony(
            kind: .authentication, challenge: challenge, userHandle: userHandle, allowCredentials: allowed.map(\.id),
            userVerification: uv, appID: appID, binding: binding, expiresAt: rp.clock.now().addingTimeInterval(rp.challengeLifetime))
        try await remember(ceremony)
        return RequestOptions(
            rpId: rp.id, challenge: challenge, timeout: Int(rp.challengeLifetime * 1000),
            allowCredentials: allowed, userVerification: uv, hints: hints, extensions: extensions)
    }

    /// Finishes an authentication: verifies the assertion (WebAuthn L3 §7.2)
    /// and updates the credential's counter, backup state and last use with a
    /// compare-and-set.
    ///
    /// When the challenge store is also the credential store and a ``SignInCommitting``
    /// one, the ceremony and the credential are read together and the challenge is consumed
    /// with the counter update in one transaction (with `signingIn`'s session too, when its
    /// store is the same object): the result step is one read and one durable write.
    ///
    /// - Parameters:
    ///   - response: the client's response.
    ///   - expectedChallenge: the challenge bound to the client's session, if
    ///     the caller keeps one. Without it the ceremony is found by the
    ///     challenge in the client data.
    ///   - binding: the binding of the session presenting the response; it
    ///     must equal the one the ceremony was started with, if any.
    ///   - signingIn: a signed-in session to store with the sign-in, only if it succeeds. Default none.
    /// - Returns: what was verified, with the updated credential record.
    /// - Throws: the first failed check's code (`challenge_unknown`,
    ///   `credential_unknown`, `signature_invalid`, `counter_regression`, ...; see
    ///   `Docs/Errors.md`), `concurrent_update` when another authentication
    ///   updated the credential first, or `storage_failure`.
    public func finishAuthentication(
        _ response: AuthenticationResponse, expectedChallenge: [UInt8]? = nil,
        binding: [UInt8]? = nil, signingIn: SessionSignIn<AuthenticationResult>? = nil
    ) async throws(WebAuthnError) -> AuthenticationResult {
        let clientData = try CollectedClientData(bytes: response.clientDataJSON)
        let (ceremony, read, committing) = try await pendingCeremony(
            for: clientData, kind: .authentication, expected: expectedChallenge, binding: binding, credentialId: response.id)
        var stored = read
        if committing == nil { stored = try await store { try await credentials.credential(id: response.id) } }
        guard let credential = stored else {
            // Step 5 first: an ID outside allowCredentials says so, known or not.
            try AuthenticationVerifier.verifyAllowedCredential(response.id, ceremony: ceremony)
            Self.verifyWithDecoy(response, clientData: clientData, ceremony: ceremony, relyingParty: configuredRelyingParty)
            throw WebAuthnError(
                .credentialUnknown, "no credential with id \(Base64URL.encode(response.id).prefix(96)) is registered", step: "WebAuthn L3 §7.2 step 6")
        }
        let result: AuthenticationResult
        do {
            result = try AuthenticationVerifier.verify(
                response, clientData: clientData, ceremony: ceremony, credential: credential, relyingParty: configuredRelyingParty)
        } catch {
            // A replay racing its original: the original consumed the challenge and advanced the
            // counter between this one's two reads. It is refused as the replay it is (CI, under the
            // thread sanitizer: a counter_regression among 32 concurrent submissions of one assertion).
            if error.code == .counterRegression, (try? await challengeGone(ceremony)) == true { throw Self.challengeTaken }
            throw error
        }
        var session: SignedInSession?
        if let signingIn { session = try await store { try await signingIn.session(result) } }
        let conflict = WebAuthnError(.concurrentUpdate, "another authentication updated this credential at the same time; try again")
        if let committing {
            // One transaction: the challenge consumed and the counter compare-and-set (and the
            // session, in the same store), one durable write.
            let together = signingIn.map { ($0.store as AnyObject) === (committing as AnyObject) } ?? false
            let outcome = try await store {
                if let session, let signingIn, together {
                    try await committing.commitSignIn(
                        consuming: ceremony.challenge, updating: result.updatedCredential, expectedSignCount: credential.signCount,
                        signingIn: session, replacing: signingIn.replacing)
                } else {
                    try await committing.commitSignIn(
                        consuming: ceremony.challenge, updating: result.updatedCredential, expectedSignCount: credential.signCount)
                }
            }
            switch outcome {
            case .committed:
                housekeeping.release()
                if !together { try await storeSession(session, signingIn) }
                return result
            case .challengeGone: throw Self.challengeTaken
            case .counterChanged:
                housekeeping.release()
                throw conflict
            }
        }
        try await consume(ceremony)
        guard try await store({ try await credentials.update(result.updatedCredential, expectedSignCount: credential.signCount) }) else { throw conflict }
        try await storeSession(session, signingIn)
        return result
    }

    /// Whether `ceremony`'s challenge is no longer pending (consumed by another response).
    func challengeGone(_ ceremony: PendingCeremony) async throws(WebAuthnError) -> Bool {
        try await store { try await challenges.pending(challenge: ceremony.challenge) } == nil
    }

    /// A P-256 key made at start whose private half is dropped: nobody can sign for it.
    static let decoyKey: COSEKey? = {
        guard let key = try? SigningKey.generate(.es256) else { return nil }
        return try? COSEKey(bytes: CBOREncoder.encode(key.coseKey()))
    }()
    /// How many assertions were verified against ``decoyKey`` (for the tests).
    package static let decoyChecks = Locked(0)

    /// An assertion whose credential is not registered, verified as a registered credential's would
    /// be (every step in order, the signature against a key nobody holds) before the sign-in fails:
    /// the answer then takes as long for a stand-in credential ID (what `allowCredentials` lists for a
    /// name with no account) as for a registered one, whichever step fails. Red team, sixth pass:
    /// without it a wrong signature answered 80 to 100 µs later for a registered ID; seventh pass:
    /// with a signature check alone, a wrong origin answered 46 to 79 µs later for a stand-in.
    /// Returns the code of the step that failed (the signature's, when every other passed).
    @discardableResult
    static func verifyWithDecoy(_ response: AuthenticationResponse, clientData: CollectedClientData, ceremony: PendingCeremony, relyingParty rp: RelyingParty)
        -> WebAuthnError.Code?
    {
        guard let key = decoyKey else { return nil }
        let authData = try? AuthenticatorData(bytes: response.authenticatorData)
        let decoy = CredentialRecord(
            id: response.id, userHandle: ceremony.userHandle ?? response.userHandle ?? [], publicKey: key, signCount: 0, uvInitialized: false,
            backupEligible: authData?.backupEligible ?? false, backupState: authData?.backedUp ?? false, createdAt: rp.clock.now())
        decoyChecks.withLock { $0 += 1 }
        do {
            _ = try AuthenticationVerifier.verify(response, clientData: clientData, ceremony: ceremony, credential: decoy, relyingParty: rp)
            return nil
        } catch {
            return error.code
        }
    }

    /// Stores a sign-in's session after its commit (a session store apart from the sign-in's).
    func storeSession<Verified>(_ session: SignedInSession?, _ signingIn: SessionSignIn<Verified>?) async throws(WebAuthnError) {
        guard let session, let signingIn else { return }
        try await store { try await signingIn.store.replace(signingIn.replacing, with: session) }
    }

    /// Decodes a JSON request body (`AuthenticationResponseJSON`) and finishes the
    /// authentication; see ``finishAuthentication(_:expectedChallenge:binding:signingIn:)``.
    public func finishAuthentication(json: [UInt8], expectedChallenge: [UInt8]? = nil, binding: [UInt8]? = nil) async throws(WebAuthnError)
        -> AuthenticationResult
    {
        try await finishAuthentication(AuthenticationResponse(json: json), expectedChallenge: expectedChallenge, binding: binding)
    }
}
