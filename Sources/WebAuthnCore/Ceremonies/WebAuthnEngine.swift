import Foundation

/// The relying party's stateful API: start and finish registration and
/// authentication ceremonies against a credential store and a challenge store.
///
/// Verification never writes. A ceremony is committed only after every check
/// has passed: the challenge is consumed (exactly once, atomically) and then
/// the credential is inserted, or its counter compare-and-set. A failed
/// ceremony changes nothing stored; of two concurrent submissions of one
/// response, exactly one succeeds.
public struct WebAuthnEngine: Sendable {
    public let relyingParty: RelyingParty
    public let credentials: any CredentialStore
    public let challenges: any ChallengeStore

    public init(relyingParty: RelyingParty, credentials: any CredentialStore, challenges: any ChallengeStore) {
        self.relyingParty = relyingParty
        self.credentials = credentials
        self.challenges = challenges
    }

    /// An engine with in-memory stores (tests, demos).
    public init(relyingParty: RelyingParty) {
        self.init(relyingParty: relyingParty, credentials: InMemoryCredentialStore(),
                  challenges: InMemoryChallengeStore(clock: relyingParty.clock))
    }

    // MARK: Registration

    /// Starts a registration: issues a fresh challenge, remembers the ceremony
    /// and returns the options for `navigator.credentials.create()`. The
    /// user's existing credentials are listed in `excludeCredentials`.
    public func startRegistration(
        user: UserEntity,
        authenticatorSelection: AuthenticatorSelection? = nil,
        attestation: String = "none",
        hints: [String] = [],
        extensions: JSONObject = JSONObject(),
        challengeLength: Int = 32
    ) async throws(WebAuthnError) -> CreationOptions {
        let rp = relyingParty
        let selection = authenticatorSelection ?? AuthenticatorSelection(userVerification: rp.policy.userVerification)
        let challenge = try Self.newChallenge(length: challengeLength)
        let existing = try await store { try await credentials.credentials(forUser: user.id) }
        let ceremony = PendingCeremony(
            kind: .registration, challenge: challenge, user: user, algorithms: rp.policy.algorithms,
            userVerification: selection.userVerification, expiresAt: rp.clock.now().addingTimeInterval(rp.challengeLifetime))
        try await store { try await challenges.insert(ceremony) }
        return CreationOptions(
            rpId: rp.id, rpName: rp.name, user: user, challenge: challenge, algorithms: rp.policy.algorithms,
            timeout: Int(rp.challengeLifetime * 1000),
            excludeCredentials: existing.map { CredentialDescriptor(id: $0.id, transports: $0.transports) },
            authenticatorSelection: selection, attestation: attestation, hints: hints, extensions: extensions)
    }

    /// Finishes a registration: verifies the response (WebAuthn L3 §7.1) and
    /// stores the new credential.
    ///
    /// - Parameter expectedChallenge: the challenge bound to the client's
    ///   session, if the caller keeps one. Without it the ceremony is found by
    ///   the challenge in the client data.
    public func finishRegistration(_ response: RegistrationResponse, expectedChallenge: [UInt8]? = nil) async throws(WebAuthnError) -> RegistrationResult {
        let clientData = try CollectedClientData(bytes: response.clientDataJSON)
        let ceremony = try await pendingCeremony(for: clientData, kind: .registration, expected: expectedChallenge)
        let result = try RegistrationVerifier.verify(response, clientData: clientData, ceremony: ceremony, relyingParty: relyingParty)
        let record = result.credential
        // §7.1 step 27: the credential ID is not yet registered for any user.
        if try await store({ try await credentials.credential(id: record.id) }) != nil {
            throw WebAuthnError(.credentialAlreadyRegistered, "credential \(Base64URL.encode(record.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
        try await consume(ceremony)
        do {
            try await store { try await credentials.insert(record) }
        } catch {
            // Lost a race to register the same ID: give the challenge back.
            try? await challenges.insert(ceremony)
            throw error
        }
        return result
    }

    /// Decodes a JSON request body and finishes the registration.
    public func finishRegistration(json: [UInt8], expectedChallenge: [UInt8]? = nil) async throws(WebAuthnError) -> RegistrationResult {
        try await finishRegistration(RegistrationResponse(json: json), expectedChallenge: expectedChallenge)
    }

    // MARK: Authentication

    /// Starts an authentication. With a user handle, the user's credentials
    /// are listed in `allowCredentials`; without one, the login is
    /// discoverable (usernameless) and the response must carry `userHandle`.
    public func startAuthentication(
        userHandle: [UInt8]? = nil,
        userVerification: UserVerificationRequirement? = nil,
        hints: [String] = [],
        extensions: JSONObject = JSONObject(),
        conditionalMediation: Bool = false,
        challengeLength: Int = 32
    ) async throws(WebAuthnError) -> RequestOptions {
        let rp = relyingParty
        let challenge = try Self.newChallenge(length: challengeLength)
        var allowed: [CredentialRecord] = []
        if let userHandle {
            allowed = try await store { try await credentials.credentials(forUser: userHandle) }
        }
        let uv = userVerification ?? rp.policy.userVerification
        let ceremony = PendingCeremony(
            kind: .authentication, challenge: challenge, userHandle: userHandle, allowCredentials: allowed.map(\.id),
            userVerification: uv, conditionalMediation: conditionalMediation,
            expiresAt: rp.clock.now().addingTimeInterval(rp.challengeLifetime))
        try await store { try await challenges.insert(ceremony) }
        return RequestOptions(
            rpId: rp.id, challenge: challenge, timeout: Int(rp.challengeLifetime * 1000),
            allowCredentials: allowed.map { CredentialDescriptor(id: $0.id, transports: $0.transports) },
            userVerification: uv, hints: hints, extensions: extensions)
    }

    /// Finishes an authentication: verifies the assertion (WebAuthn L3 §7.2)
    /// and updates the credential's counter, backup state and last use with a
    /// compare-and-set.
    public func finishAuthentication(_ response: AuthenticationResponse, expectedChallenge: [UInt8]? = nil) async throws(WebAuthnError) -> AuthenticationResult {
        let clientData = try CollectedClientData(bytes: response.clientDataJSON)
        let ceremony = try await pendingCeremony(for: clientData, kind: .authentication, expected: expectedChallenge)
        guard let credential = try await store({ try await credentials.credential(id: response.id) }) else {
            // Step 5 first: an ID outside allowCredentials says so, known or not.
            try AuthenticationVerifier.verifyAllowedCredential(response.id, ceremony: ceremony)
            throw WebAuthnError(.credentialUnknown, "no credential with id \(Base64URL.encode(response.id).prefix(96)) is registered", step: "WebAuthn L3 §7.2 step 6")
        }
        let result = try AuthenticationVerifier.verify(response, clientData: clientData, ceremony: ceremony, credential: credential, relyingParty: relyingParty)
        try await consume(ceremony)
        guard try await store({ try await credentials.update(result.updatedCredential, expectedSignCount: credential.signCount) }) else {
            throw WebAuthnError(.concurrentUpdate, "another authentication updated this credential at the same time; try again")
        }
        return result
    }

    /// Decodes a JSON request body and finishes the authentication.
    public func finishAuthentication(json: [UInt8], expectedChallenge: [UInt8]? = nil) async throws(WebAuthnError) -> AuthenticationResult {
        try await finishAuthentication(AuthenticationResponse(json: json), expectedChallenge: expectedChallenge)
    }

    // MARK: Internals

    static func newChallenge(length: Int) throws(WebAuthnError) -> [UInt8] {
        guard (16...64).contains(length) else {
            throw WebAuthnError(.configurationInvalid, "challenges must be 16 to 64 bytes; asked for \(length)")
        }
        return SecureRandom.bytes(length)
    }

    /// Finds the pending ceremony a response answers, without consuming it.
    func pendingCeremony(for c: CollectedClientData, kind: PendingCeremony.Kind, expected: [UInt8]?) async throws(WebAuthnError) -> PendingCeremony {
        let key: [UInt8]
        if let expected {
            let step = kind == .registration ? "WebAuthn L3 §7.1 step 8" : "WebAuthn L3 §7.2 step 11"
            try ClientDataChecks.verifyChallenge(c, expected: expected, step: step)
            key = expected
        } else {
            guard let decoded = Base64URL.decode(c.challenge), !decoded.isEmpty else {
                throw WebAuthnError(.challengeUnknown, "clientData.challenge is not base64url")
            }
            key = decoded
        }
        guard let ceremony = try await store({ try await challenges.pending(challenge: key) }) else {
            throw WebAuthnError(.challengeUnknown, "no \(kind.rawValue) ceremony is waiting for challenge \(Base64URL.encode(key).prefix(96)); it was never issued or was already used")
        }
        guard ceremony.kind == kind else {
            throw WebAuthnError(.ceremonyMismatch, "the challenge was issued for \(ceremony.kind.rawValue), not \(kind.rawValue)")
        }
        let now = relyingParty.clock.now()
        guard now <= ceremony.expiresAt else {
            throw WebAuthnError(.challengeExpired, "the challenge expired at \(ISO8601DateFormatter().string(from: ceremony.expiresAt)); the time is \(ISO8601DateFormatter().string(from: now))")
        }
        return ceremony
    }

    /// Consumes the challenge; exactly one concurrent caller succeeds.
    func consume(_ ceremony: PendingCeremony) async throws(WebAuthnError) {
        guard try await store({ try await challenges.consume(challenge: ceremony.challenge) }) != nil else {
            throw WebAuthnError(.challengeUnknown, "the challenge was used by another response at the same time")
        }
    }

    /// Runs a store operation, mapping foreign errors to `storage_failure`.
    func store<T>(_ body: () async throws -> T) async throws(WebAuthnError) -> T {
        do {
            return try await body()
        } catch let error as WebAuthnError {
            throw error
        } catch {
            throw WebAuthnError(.storageFailure, "the store failed: \(error)")
        }
    }
}
