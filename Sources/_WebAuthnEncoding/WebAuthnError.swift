/// The one error type of the engine.
///
/// Every failed check throws a `WebAuthnError` whose ``code`` is stable and
/// machine-readable (switch on it, log it) and whose ``message`` is a human
/// sentence with the expected and the actual value where there are any. Answer a
/// client with `clientFacing(_:requestID:)` (WebAuthnCore), not with the error
/// itself: a sign-in failure's detail tells a stranger which credentials exist. Adding a code is not a breaking change; renaming one is.
/// The full catalogue is in `Docs/Errors.md`.
public struct WebAuthnError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable error code such as `challenge_mismatch`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
        /// The code as text, such as `challenge_mismatch`.
        public let rawValue: String
        /// The code with this text.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code with this text, written as a literal.
        public init(stringLiteral value: String) { self.rawValue = value }
        /// The code as text.
        public var description: String { rawValue }
    }

    /// The stable, machine-readable code (see ``Code``).
    public let code: Code
    /// A human-readable explanation, with expected versus actual where it applies.
    public let message: String
    /// The spec step this check implements, e.g. "WebAuthn L3 §7.1 step 8".
    public let step: String?

    /// An error.
    ///
    /// - Parameters:
    ///   - code: The stable code.
    ///   - message: A human-readable explanation.
    ///   - step: The spec step the failed check implements, if any.
    public init(_ code: Code, _ message: String, step: String? = nil) {
        self.code = code
        self.message = message
        self.step = step
    }

    /// `code: message`, followed by ` [step]` when there is a step.
    public var description: String {
        if let step { return "\(code.rawValue): \(message) [\(step)]" }
        return "\(code.rawValue): \(message)"
    }

    /// Errors are equal when their codes are: the code is the stable,
    /// machine-readable part; the message is for people and may change.
    public static func == (lhs: WebAuthnError, rhs: WebAuthnError) -> Bool {
        lhs.code == rhs.code
    }
}

extension WebAuthnError.Code {
    // MARK: Input decoding
    /// The request body or a JSON field is not valid JSON, or exceeds the JSON limits.
    public static let jsonMalformed: Self = "json_malformed"
    /// A required field is missing or has the wrong JSON type.
    public static let responseMalformed: Self = "response_malformed"
    /// The HTTP request is malformed: its framing, target or `Host`, an unreadable body or form,
    /// or a member of the request other than the credential (a user name, an identity token).
    public static let requestMalformed: Self = "request_malformed"
    /// No route of the server answers the request's path (`webauthn serve`, HTTP 404).
    public static let notFound: Self = "not_found"
    /// The path is served, with other methods (`webauthn serve`, HTTP 405 with `Allow`).
    public static let methodNotAllowed: Self = "method_not_allowed"
    /// A field that must be base64url is not.
    public static let base64urlInvalid: Self = "base64url_invalid"
    /// An input exceeds a size limit of the engine.
    public static let inputTooLarge: Self = "input_too_large"
    /// `type` of the credential is not `public-key`.
    public static let credentialTypeInvalid: Self = "credential_type_invalid"
    /// `id`, `rawId` and the credential ID in the authenticator data disagree.
    public static let credentialIdMismatch: Self = "credential_id_mismatch"
    /// CBOR is malformed, truncated, has trailing bytes, indefinite lengths,
    /// tags or duplicate map keys.
    public static let cborMalformed: Self = "cbor_malformed"
    /// CBOR nesting depth or item count exceeds the engine's limits.
    public static let cborLimitExceeded: Self = "cbor_limit_exceeded"
    /// The attestation object is not a map of `fmt`, `authData`, `attStmt`.
    public static let attestationObjectMalformed: Self = "attestation_object_malformed"
    /// The authenticator data is truncated, has trailing bytes or inconsistent flags.
    public static let authenticatorDataMalformed: Self = "authenticator_data_malformed"
    /// The credential public key is not a valid COSE key.
    public static let coseKeyInvalid: Self = "cose_key_invalid"
    /// An Ed25519 or Ed448 public key is a point of small order (such as the
    /// identity), for which one signature verifies for every message.
    public static let publicKeySmallOrder: Self = "public_key_small_order"
    /// An EC public key is not a valid point of its curve (OpenSSL's public key check).
    public static let publicKeyPointInvalid: Self = "public_key_point_invalid"
    /// An RSA public key's modulus is even or not 2048 to 8192 bits, or its exponent is even or below 3.
    public static let publicKeyRSAInvalid: Self = "public_key_rsa_invalid"

    // MARK: Client data
    /// clientDataJSON is not UTF-8 JSON with the required members.
    public static let clientDataMalformed: Self = "client_data_malformed"
    /// `type` in clientDataJSON is not `webauthn.create` / `webauthn.get`.
    public static let clientDataTypeMismatch: Self = "client_data_type_mismatch"
    /// The challenge in clientDataJSON is not the one issued.
    public static let challengeMismatch: Self = "challenge_mismatch"
    /// No ceremony is waiting for this challenge (never issued, or already used).
    public static let challengeUnknown: Self = "challenge_unknown"
    /// The challenge was issued too long ago.
    public static let challengeExpired: Self = "challenge_expired"
    /// The challenge was issued for the other kind of ceremony.
    public static let ceremonyMismatch: Self = "ceremony_mismatch"
    /// The origin is not in the relying party's allow-list.
    public static let originNotAllowed: Self = "origin_not_allowed"
    /// `crossOrigin: true` but the policy does not allow cross-origin ceremonies.
    public static let crossOriginNotAllowed: Self = "cross_origin_not_allowed"
    /// `topOrigin` is not one of the allowed top-level origins.
    public static let topOriginNotAllowed: Self = "top_origin_not_allowed"
    /// `tokenBinding` is an object whose `status` is neither `present` nor `supported` (other values are ignored).
    public static let tokenBindingInvalid: Self = "token_binding_invalid"

    // MARK: Authenticator data
    /// rpIdHash is not SHA-256 of the RP ID.
    public static let rpIdHashMismatch: Self = "rp_id_hash_mismatch"
    /// The User Present flag is not set.
    public static let userPresenceMissing: Self = "user_presence_missing"
    /// User verification was required but the User Verified flag is not set.
    public static let userVerificationMissing: Self = "user_verification_missing"
    /// BS (backed up) is set while BE (backup eligible) is not.
    public static let backupStateInvalid: Self = "backup_state_invalid"
    /// BE differs from the value recorded at registration.
    public static let backupEligibilityChanged: Self = "backup_eligibility_changed"
    /// Registration authenticator data carries no attested credential data.
    public static let attestedCredentialDataMissing: Self = "attested_credential_data_missing"
    /// The credential ID is longer than 1023 bytes.
    public static let credentialIdTooLong: Self = "credential_id_too_long"
    /// The credential's algorithm was not requested or is disabled by policy.
    public static let algorithmNotAllowed: Self = "algorithm_not_allowed"
    /// The algorithm is not implemented by this engine (or its OpenSSL).
    public static let algorithmUnsupported: Self = "algorithm_unsupported"

    // MARK: Attestation
    /// `fmt` is not one of the formats the engine verifies.
    public static let attestationFormatUnsupported: Self = "attestation_format_unsupported"
    /// The attestation statement does not have the format's required shape.
    public static let attestationStatementMalformed: Self = "attestation_statement_malformed"
    /// The attestation signature does not verify.
    public static let attestationSignatureInvalid: Self = "attestation_signature_invalid"
    /// An attestation certificate does not meet the format's requirements.
    public static let attestationCertificateInvalid: Self = "attestation_certificate_invalid"
    /// The AAGUID in the attestation certificate differs from authenticator data.
    public static let attestationAAGUIDMismatch: Self = "attestation_aaguid_mismatch"
    /// The attestation type is not accepted by policy, or (trust required) not among the authenticator's FIDO metadata `attestationTypes`.
    public static let attestationTypeNotAllowed: Self = "attestation_type_not_allowed"
    /// A certificate is outside its validity period at the engine's time.
    public static let certificateExpired: Self = "certificate_expired"
    /// The attestation presents a certificate chain that does not lead to a
    /// trusted root, and the policy requires trusted attestation.
    public static let attestationUntrusted: Self = "attestation_untrusted"
    /// A certificate of the attestation chain is revoked by a supplied CRL.
    public static let certificateRevoked: Self = "certificate_revoked"
    /// A nonce or challenge bound into the attestation (apple nonce, Android
    /// attestationChallenge, SafetyNet nonce, TPM extraData) is not the expected one.
    public static let attestationNonceMismatch: Self = "attestation_nonce_mismatch"
    /// The key the attestation certifies is not the credential public key.
    public static let attestationKeyMismatch: Self = "attestation_key_mismatch"
    /// A SafetyNet response is too old or from the future, by the engine's clock.
    public static let attestationTimestampInvalid: Self = "attestation_timestamp_invalid"
    /// The attesting platform failed its integrity check (SafetyNet ctsProfileMatch),
    /// or an Android key was not generated in secure hardware as the policy requires.
    public static let attestationIntegrityFailed: Self = "attestation_integrity_failed"
    /// The AAGUID is on the deny list, or not on the allow list.
    public static let aaguidNotAllowed: Self = "aaguid_not_allowed"
    /// `allowedAAGUIDs` is set and the AAGUID is on it, but nothing proves it: the
    /// attestation is none or self, or its chain does not lead to a root of that
    /// AAGUID's FIDO metadata entry (a format's built-in roots vouch for no model).
    public static let aaguidUnverified: Self = "aaguid_unverified"
    /// FIDO metadata reports the authenticator as compromised and the policy requires trust.
    public static let authenticatorCompromised: Self = "authenticator_compromised"

    // MARK: Metadata
    /// FIDO metadata could not be read: not a BLOB JWT, BLOB payload, statement or folder of statements.
    public static let metadataInvalid: Self = "metadata_invalid"
    /// The metadata BLOB's signing chain does not lead to the FIDO MDS root, or its signature does not verify.
    public static let metadataUntrusted: Self = "metadata_untrusted"
    /// The metadata BLOB is past its nextUpdate, or older (`no`) than one already loaded.
    public static let metadataStale: Self = "metadata_stale"
    /// The metadata service could not be reached, timed out, answered a status other than 200 or 304,
    /// or sent a body over the size cap or shorter than it announced; the last good BLOB stays in use.
    public static let metadataUnavailable: Self = "metadata_unavailable"

    // MARK: Credentials and users
    /// A credential with this ID is already registered.
    public static let credentialAlreadyRegistered: Self = "credential_already_registered"
    /// The credential is not in `allowCredentials`.
    public static let credentialNotAllowed: Self = "credential_not_allowed"
    /// No credential with this ID is registered.
    public static let credentialUnknown: Self = "credential_unknown"
    /// The credential belongs to another user than the one the ceremony was for.
    public static let credentialNotOwnedByUser: Self = "credential_not_owned_by_user"
    /// A discoverable login without `userHandle`.
    public static let userHandleMissing: Self = "user_handle_missing"
    /// `userHandle` is not the credential owner's user handle.
    public static let userHandleMismatch: Self = "user_handle_mismatch"

    // MARK: Assertion
    /// The assertion signature does not verify with the credential public key.
    public static let signatureInvalid: Self = "signature_invalid"
    /// The sign counter did not increase (possible cloned authenticator).
    public static let counterRegression: Self = "counter_regression"
    /// Another ceremony updated the credential at the same time (compare-and-set lost).
    public static let concurrentUpdate: Self = "concurrent_update"
    /// The credential is flagged (FIDO metadata reports its authenticator compromised) and the policy refuses flagged credentials.
    public static let credentialFlagged: Self = "credential_flagged"

    // MARK: Extensions and requested properties
    /// The options required a discoverable credential and the client reported one that is not (`credProps.rk` false).
    public static let discoverableCredentialMissing: Self = "discoverable_credential_missing"
    /// The options enforced a credProtect level and the authenticator data reports a weaker one, or none.
    public static let credentialProtectionWeaker: Self = "credential_protection_weaker"
    /// An extension output has the wrong type or an out-of-range value.
    public static let extensionOutputInvalid: Self = "extension_output_invalid"

    // MARK: Sessions, accounts and the server
    /// The response did not come with the session (binding) that asked for its options.
    public static let sessionMismatch: Self = "session_mismatch"
    /// A user name or display name breaks the name rules (``UserName``).
    public static let usernameInvalid: Self = "username_invalid"
    /// An account with this name (or one that looks like it) exists, and the request may not enroll onto it.
    public static let usernameUnavailable: Self = "username_unavailable"
    /// The action needs a signed-in session.
    public static let signInRequired: Self = "sign_in_required"
    /// The action needs the signed-in account to have verified the user recently (a fresh assertion with user verification).
    public static let reauthenticationRequired: Self = "reauthentication_required"
    /// A credential's name is empty, too long or holds control characters.
    public static let credentialNameInvalid: Self = "credential_name_invalid"
    /// The user holds as many credentials as the relying party allows (`WebAuthnEngine.Limits.maxCredentialsPerUser`):
    /// one must be deleted before another is added.
    public static let credentialLimitReached: Self = "credential_limit_reached"
    /// The credential is the account's only way to sign in (no other credential, no linked
    /// identity): deleting it would lock the account out. Delete the account instead, or add another first.
    public static let lastCredential: Self = "last_credential"
    /// What the server tells a client for any failed sign-in whose detail would help an attacker
    /// (unknown credential, another account's credential, user handle mismatch, bad signature).
    public static let authenticationFailed: Self = "authentication_failed"
    /// Too many requests from this client or session; retry after the time given.
    public static let rateLimited: Self = "rate_limited"
    /// The relying party holds as many pending ceremonies as it is configured to; retry later.
    public static let tooManyPendingCeremonies: Self = "too_many_pending_ceremonies"
    /// A request body that is not `application/json`.
    public static let contentTypeUnsupported: Self = "content_type_unsupported"
    /// An internal failure, reported to the client without detail (the log has it, under the request id).
    public static let internalError: Self = "internal_error"

    // MARK: Engine
    /// The configuration is invalid (e.g. no origin).
    public static let configurationInvalid: Self = "configuration_invalid"
    /// A store failed; nothing was changed by the ceremony.
    public static let storageFailure: Self = "storage_failure"
    /// OpenSSL reported an internal failure (not a verification failure).
    public static let cryptoFailure: Self = "crypto_failure"

    /// Every code the engine can throw (documented in Docs/Errors.md), in the order declared above.
    /// Tests/WebAuthnCoreTests/DocumentationTests.swift checks it against the declarations and the docs.
    public static let catalogue: [WebAuthnError.Code] = [
        .jsonMalformed, .responseMalformed, .requestMalformed, .notFound, .methodNotAllowed, .base64urlInvalid, .inputTooLarge, .credentialTypeInvalid,
        .credentialIdMismatch, .cborMalformed, .cborLimitExceeded, .attestationObjectMalformed, .authenticatorDataMalformed, .coseKeyInvalid,
        .publicKeySmallOrder, .publicKeyPointInvalid, .publicKeyRSAInvalid,
        .clientDataMalformed, .clientDataTypeMismatch, .challengeMismatch, .challengeUnknown, .challengeExpired, .ceremonyMismatch,
        .originNotAllowed, .crossOriginNotAllowed, .topOriginNotAllowed, .tokenBindingInvalid,
        .rpIdHashMismatch, .userPresenceMissing, .userVerificationMissing, .backupStateInvalid, .backupEligibilityChanged,
        .attestedCredentialDataMissing, .credentialIdTooLong, .algorithmNotAllowed, .algorithmUnsupported,
        .attestationFormatUnsupported, .attestationStatementMalformed, .attestationSignatureInvalid, .attestationCertificateInvalid,
        .attestationAAGUIDMismatch, .attestationTypeNotAllowed, .certificateExpired, .attestationUntrusted, .certificateRevoked,
        .attestationNonceMismatch, .attestationKeyMismatch, .attestationTimestampInvalid, .attestationIntegrityFailed,
        .aaguidNotAllowed, .aaguidUnverified, .authenticatorCompromised, .metadataInvalid, .metadataUntrusted, .metadataStale,
        .metadataUnavailable,
        .credentialAlreadyRegistered, .credentialNotAllowed, .credentialUnknown, .credentialNotOwnedByUser, .userHandleMissing,
        .userHandleMismatch, .signatureInvalid, .counterRegression, .concurrentUpdate, .credentialFlagged,
        .discoverableCredentialMissing, .credentialProtectionWeaker, .extensionOutputInvalid,
        .sessionMismatch, .usernameInvalid, .usernameUnavailable, .signInRequired, .reauthenticationRequired, .credentialNameInvalid,
        .credentialLimitReached, .lastCredential,
        .authenticationFailed, .rateLimited,
        .tooManyPendingCeremonies, .contentTypeUnsupported, .internalError,
        .configurationInvalid, .storageFailure, .cryptoFailure,
        .appleTokenMalformed, .appleTokenSignatureInvalid, .appleKeyUnknown, .appleKeyInvalid, .appleJWKSInvalid, .appleJWKSUnavailable,
        .appleTokenClaimInvalid, .appleTokenExpired, .appleNonceMismatch, .appleRequestRefused, .appleEndpointUnavailable,
        .appleNotificationInvalid,
        .identityInvalid, .identityAlreadyLinked, .identityUnknown, .accountUnknown,
    ]

    // MARK: Sign in with Apple
    /// An Apple identity token or notification payload is not a compact JWS of JSON, is too large,
    /// or its header is refused: `alg` other than RS256 (`none`, HS256, ES256...), no `kid`, or `crit`.
    public static let appleTokenMalformed: Self = "apple_token_malformed"
    /// The token's RS256 signature does not verify with the Apple key its `kid` names.
    public static let appleTokenSignatureInvalid: Self = "apple_token_signature_invalid"
    /// No key of Apple's key set has the token's `kid` (after the one refetch the cache allows).
    public static let appleKeyUnknown: Self = "apple_key_unknown"
    /// The key with the token's `kid` is not an RSA signing key for RS256 of 2048 bits or more.
    public static let appleKeyInvalid: Self = "apple_key_invalid"
    /// Apple's key set is not a JWKS (strict JSON, size and key count limits, unique `kid`s).
    public static let appleJWKSInvalid: Self = "apple_jwks_invalid"
    /// Apple's key set could not be fetched and no earlier good set is held.
    public static let appleJWKSUnavailable: Self = "apple_jwks_unavailable"
    /// A claim is missing, has the wrong type or value: `iss`, `aud`, `sub`, `iat` in the future, the email claims.
    public static let appleTokenClaimInvalid: Self = "apple_token_claim_invalid"
    /// The token's `exp` has passed (beyond the leeway).
    public static let appleTokenExpired: Self = "apple_token_expired"
    /// A nonce was expected and the token's `nonce` is missing or is neither it nor its SHA-256 in lowercase hex.
    public static let appleNonceMismatch: Self = "apple_nonce_mismatch"
    /// Apple's token or revoke endpoint refused the request (`invalid_grant`, `invalid_client`...; Apple's string is in the message).
    public static let appleRequestRefused: Self = "apple_request_refused"
    /// Apple's endpoint could not be reached, timed out, or answered something that is not its documented response.
    public static let appleEndpointUnavailable: Self = "apple_endpoint_unavailable"
    /// A server-to-server notification body or its `events` claim does not have the documented shape.
    public static let appleNotificationInvalid: Self = "apple_notification_invalid"
}

extension WebAuthnError.Code {
    // MARK: Accounts and linked identities
    /// A linked identity (provider, subject, email) is empty, too long or has control characters.
    public static let identityInvalid: Self = "identity_invalid"
    /// The provider identity is already linked to an account.
    public static let identityAlreadyLinked: Self = "identity_already_linked"
    /// The signed-in account has no linked identity with that id (unlinking one).
    public static let identityUnknown: Self = "identity_unknown"
    /// No account has that handle.
    public static let accountUnknown: Self = "account_unknown"
}
