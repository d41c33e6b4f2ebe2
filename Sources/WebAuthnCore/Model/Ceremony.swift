public import Foundation
public import _WebAuthnEncoding
package import _WebAuthnCrypto

/// The state of a ceremony between its options and the client's response:
/// what the relying party asked for, kept by a ``ChallengeStore`` under its
/// challenge and consumed once.
public struct PendingCeremony: Sendable {
    /// What the pending value is for.
    public enum Kind: String, Sendable {
        /// A WebAuthn registration (creation options).
        case registration
        /// A WebAuthn authentication (request options).
        case authentication
        /// A Sign in with Apple nonce issued to an app, consumed by the identity token that carries it.
        case appleNonce = "apple-nonce"
        /// A Sign in with Apple web-flow `state`, consumed by Apple's form post back.
        case appleState = "apple-state"
        /// A Sign in with Apple server-to-server notification already acted on, kept to drop its duplicates.
        case appleNotification = "apple-notification"
    }

    /// Which ceremony (or Sign in with Apple step) the value belongs to.
    public let kind: Kind
    /// The challenge bytes (at least 16).
    public let challenge: [UInt8]
    /// Registration: the account being registered.
    public let user: UserEntity?
    /// Authentication: the user handle of the identified account, nil for a
    /// discoverable (usernameless) login.
    public let userHandle: [UInt8]?
    /// Authentication: `allowCredentials` IDs (empty: any of the user's).
    public let allowCredentials: [[UInt8]]
    /// Registration: the algorithms offered in `pubKeyCredParams`.
    public let algorithms: [COSEAlgorithm]
    /// The user verification the options asked for; `.required` makes a response
    /// without the UV flag fail (`user_verification_missing`).
    public let userVerification: UserVerificationRequirement
    /// Registration only: the relying party issued these options for a
    /// conditional create (an automatic passkey upgrade for an account that is
    /// already signed in), so user presence is not required (WebAuthn L3 §7.1
    /// step 15). Decided by the server when it issues the options, never by
    /// the client. Authentication always requires user presence (§7.2 step 16).
    public let conditionalCreate: Bool
    /// Registration only: the ceremony creates the account `user` together with
    /// its first credential (atomically, through ``AccountStore/create(_:firstCredential:)``).
    public let newAccount: Bool
    /// Registration only: `user` was an account of the engine's account store when the
    /// ceremony started, so the credential is stored only if that account still exists
    /// (in the commit's transaction where the store can): a registration must not store a
    /// credential for an account deleted since (`account_unknown`).
    public let addsToAccount: Bool
    /// Registration: the `residentKey` the options asked for; `.required` makes a
    /// response reporting `credProps.rk: false` fail (`discoverable_credential_missing`).
    public let residentKey: ResidentKeyRequirement
    /// Registration: the `authenticatorAttachment` the options asked for, if any
    /// (the attachment that came back is recorded with the credential).
    public let authenticatorAttachment: AuthenticatorAttachment?
    /// Registration: the credProtect level the options asked for, if any.
    public let credentialProtection: CredentialProtectionRequest?
    /// Authentication: the U2F AppID the options offered (`appid`); an assertion whose
    /// rpIdHash is SHA-256 of it is accepted, for a credential registered through U2F only.
    public let appID: String?
    /// What the response must come with: an opaque value derived from the
    /// session that asked for the options (for example a hash of its cookie).
    /// When set, a response that does not present the same binding is refused
    /// (`session_mismatch`), so a ceremony cannot be finished from another browser.
    public let binding: [UInt8]?
    /// When the ceremony stops being valid (for options: the issue time plus
    /// ``RelyingParty/challengeLifetime``); a response after it fails with `challenge_expired`.
    public let expiresAt: Date

    /// A pending ceremony. ``conditionalCreate``, ``newAccount`` and ``addsToAccount`` are kept
    /// only for `.registration` (false for every other kind).
    ///
    /// - Parameters:
    ///   - kind: What the ceremony is for.
    ///   - challenge: The challenge issued with the options.
    ///   - user: Registration: the account being registered.
    ///   - userHandle: Authentication: the identified account, nil for a discoverable login.
    ///   - allowCredentials: Authentication: the credential IDs offered (empty: any of the user's).
    ///   - algorithms: Registration: the algorithms offered in `pubKeyCredParams`.
    ///   - userVerification: The user verification the options asked for.
    ///   - conditionalCreate: Registration: the options are for a conditional create.
    ///   - newAccount: Registration: the ceremony creates `user` with its first credential.
    ///   - addsToAccount: Registration: `user` is an existing account of the engine's account store.
    ///   - residentKey: Registration: the `residentKey` the options asked for.
    ///   - authenticatorAttachment: Registration: the attachment the options asked for, if any.
    ///   - credentialProtection: Registration: the credProtect request of the options, if any.
    ///   - appID: Authentication: the U2F AppID the options offered, if any.
    ///   - binding: The opaque session binding the response must present, if any.
    ///   - expiresAt: When the ceremony expires.
    public init(
        kind: Kind, challenge: [UInt8], user: UserEntity? = nil, userHandle: [UInt8]? = nil,
        allowCredentials: [[UInt8]] = [], algorithms: [COSEAlgorithm] = [],
        userVerification: UserVerificationRequirement, conditionalCreate: Bool = false, newAccount: Bool = false, addsToAccount: Bool = false,
        residentKey: ResidentKeyRequirement = .discouraged, authenticatorAttachment: AuthenticatorAttachment? = nil,
        credentialProtection: CredentialProtectionRequest? = nil, appID: String? = nil,
        binding: [UInt8]? = nil, expiresAt: Date
    ) {
        self.kind = kind
        self.challenge = challenge
        self.user = user
        self.userHandle = userHandle
        self.allowCredentials = allowCredentials
        self.algorithms = algorithms
        self.userVerification = userVerification
        self.conditionalCreate = kind == .registration && conditionalCreate
        self.newAccount = kind == .registration && newAccount
        self.addsToAccount = kind == .registration && !newAccount && addsToAccount
        self.residentKey = residentKey
        self.authenticatorAttachment = authenticatorAttachment
        self.credentialProtection = credentialProtection
        self.appID = kind == .authentication ? appID : nil
        self.binding = binding
        self.expiresAt = expiresAt
    }
}

/// What a successful registration verified.
public struct RegistrationResult: Sendable {
    /// The record to store (the engine stores it when the stateful API is used).
    public let credential: CredentialRecord
    /// The attestation statement format (`none`, `packed`, ...).
    public let format: AttestationFormat
    /// The attestation type the statement was verified as (WebAuthn L3 §6.5.3).
    public let attestationType: AttestationType
    /// Whether the attestation chains to a trust anchor, and why (or why not).
    public let trust: AttestationTrust
    /// The flags of the authenticator data.
    public let flags: AuthenticatorFlags
    /// The signature counter the authenticator reported (0 when it keeps none).
    public let signCount: UInt32
    /// UV: the authenticator verified the user.
    public let userVerified: Bool
    /// BE: the credential may be backed up (a multi-device credential, such as a synced passkey).
    public let backupEligible: Bool
    /// BS: the credential is currently backed up.
    public let backedUp: Bool
    package let authenticatorExtensions: CBOR?
    /// The client extension outputs, as the client reported them (unverified).
    public let clientExtensionResults: ClientExtensions
    /// Signals for the relying party's risk engine: `attestationUntrusted` when a
    /// certificate chain was presented but not trusted, `userNotVerified` without UV.
    public let riskSignals: Set<RiskSignal>
    /// The registration created its account (a ceremony started with `newAccount: true`);
    /// false when it added a credential to an existing account. Set by ``WebAuthnEngine``.
    public internal(set) var createdAccount = false
}

/// Whether an attestation is trusted, and why.
public struct AttestationTrust: Sendable {
    /// Whether the attestation's certificate chain was validated up to a trust anchor.
    public let trusted: Bool
    /// Why (or why not), for logs and audits.
    public let reason: String
    /// The certificate chain the attestation presented, leaf first; when
    /// trusted, the validated path up to the anchor.
    package let certificateChain: [X509Certificate]
    /// The certificates the attestation presented, leaf first; when trusted,
    /// the validated path up to the anchor.
    public var certificates: [Certificate] { certificateChain.map(Certificate.init) }
    /// The FIDO metadata entry of the authenticator, when one matched.
    public let metadata: MetadataEntry?
}

/// What a successful authentication verified.
public struct AuthenticationResult: Sendable {
    /// The ID of the credential that signed.
    public let credentialId: [UInt8]
    /// The owner of the credential.
    public let userHandle: [UInt8]
    /// The counter the authenticator reported.
    public let signCount: UInt32
    /// The counter stored before this ceremony.
    public let previousSignCount: UInt32
    /// The assertion was signed over the U2F AppID the options offered (`appid`), not the RP ID.
    public let usedAppID: Bool
    /// The credential's flag, when a re-audit found its authenticator reported compromised (it
    /// signed in because ``VerificationPolicy/flaggedCredentials`` is `.allow`).
    public let flag: CredentialFlag?
    /// The flags of the authenticator data.
    public let flags: AuthenticatorFlags
    /// UV: the authenticator verified the user.
    public let userVerified: Bool
    /// BE: the credential may be backed up (a multi-device credential).
    public let backupEligible: Bool
    /// BS: the credential is currently backed up.
    public let backedUp: Bool
    package let authenticatorExtensions: CBOR?
    /// The client extension outputs, as the client reported them (unverified).
    public let clientExtensionResults: ClientExtensions
    /// Signals for the relying party's risk engine: `possibleClonedAuthenticator`
    /// (counter did not increase, under ``CounterPolicy/acceptAndFlag``),
    /// `backupStateChanged` (BS differs from the stored record) and `userNotVerified`.
    public let riskSignals: Set<RiskSignal>
    /// The credential record as it must be stored after this ceremony.
    public let updatedCredential: CredentialRecord
}
