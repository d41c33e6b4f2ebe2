public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Whether user verification is required, preferred or discouraged
/// (WebAuthn L3 §5.8.6). Only `.required` makes a missing UV flag fail.
public enum UserVerificationRequirement: String, Sendable, CaseIterable {
    /// `required`: the UV flag must be set; `preferred`: asked for, not required;
    /// `discouraged`: not asked for.
    case required, preferred, discouraged
}

/// What to do with a response whose client data says `crossOrigin: true`
/// (WebAuthn L3 §7.1 steps 10–11, §7.2 steps 13–14).
public enum CrossOriginPolicy: Sendable, Equatable {
    /// Refuse every cross-origin ceremony. The default: an RP that does not
    /// expect to be embedded in another site's iframe should not be.
    case deny
    /// Accept cross-origin ceremonies from any top-level origin.
    case allowAnyTopOrigin
    /// Accept cross-origin ceremonies only when `topOrigin` is one of these.
    case allowTopOrigins([String])
}

/// What to do when the sign counter did not increase (WebAuthn L3 §7.2 step 22).
public enum CounterPolicy: Sendable, Equatable {
    /// Fail the ceremony with `counter_regression`. The default.
    case reject
    /// Let the ceremony succeed, report `RiskSignal.possibleClonedAuthenticator`
    /// and keep the stored counter at its higher value.
    case acceptAndFlag
}

/// Attestation types of WebAuthn L3 §6.5.3.
public enum AttestationType: String, Sendable, CaseIterable {
    /// No attestation (format `none`): nothing is claimed about the authenticator.
    case none
    /// Self attestation: the credential key signs its own statement; no certificate.
    case `self`
    /// Basic attestation: an attestation key shared by a batch of authenticators, with a certificate chain.
    case basic
    /// Attestation CA: an attestation identity key (such as a TPM's AIK) certified by an attestation CA.
    case attca
    /// Anonymization CA: a per-credential certificate from an anonymization CA (such as Apple's).
    case anonca

    /// Whether the type presents a certificate chain (and so can be trusted or not).
    public var presentsCertificateChain: Bool { self == .basic || self == .attca || self == .anonca }

    /// The type's name in FIDO metadata `attestationTypes` (MDS3), if it has one.
    public var metadataName: String? {
        switch self {
        case .basic: return "basic_full"
        case .`self`: return "basic_surrogate"
        case .attca: return "attca"
        case .anonca: return "anonca"
        case .none: return nil
        }
    }
}

/// Which Android KeyMint authorization lists must show a key generated for signing.
public enum AndroidKeyEnforcement: Sendable, Equatable {
    /// The union of the TEE/StrongBox-enforced and software-enforced lists
    /// (WebAuthn L3 §8.4): any origin or purpose they state must be
    /// KM_ORIGIN_GENERATED / KM_PURPOSE_SIGN; lists that state none pass.
    case teeOrSoftware
    /// Only the TEE/StrongBox-enforced list, which must state origin
    /// GENERATED and purpose SIGN: refuses keys that only software vouches for.
    case trustedExecutionEnvironment
}

/// What attestation a relying party accepts.
public struct AttestationPolicy: Sendable, Equatable {
    /// Attestation types that are accepted. Default: all of them.
    public var acceptedTypes: Set<AttestationType>
    /// When true, an attestation that presents a certificate chain must chain
    /// to a trusted root for its authenticator, or the ceremony fails with
    /// `attestation_untrusted`. `none` and `self` claim nothing and are not
    /// affected; restrict ``acceptedTypes`` to refuse them. Default: false,
    /// which is what consumer passkey sites need.
    public var requireTrustedAttestation: Bool

    /// When set, only these AAGUIDs may register. Default nil (any).
    public var allowedAAGUIDs: Set<AAGUID>?
    /// These AAGUIDs may never register. Default empty.
    public var deniedAAGUIDs: Set<AAGUID>
    /// Default `.teeOrSoftware`.
    public var androidKeyEnforcement: AndroidKeyEnforcement
    /// TPM: accept certInfo signed with RS1 (SHA-1), as many Windows Hello
    /// TPMs sign it. Default true. Only the TPM's signature over its own
    /// certInfo is affected; RS1 credential keys stay governed by
    /// `VerificationPolicy.allowInsecureRS1`. Turn off to refuse SHA-1 TPMs.
    public var allowSHA1TPMAttestation: Bool
    /// SafetyNet: require `ctsProfileMatch`. Default true.
    public var requireSafetyNetCTSProfileMatch: Bool
    /// SafetyNet: the oldest acceptable `timestampMs`, in seconds before now. Default 60.
    public var safetyNetMaxAge: Double

    /// A policy; every parameter defaults to the property's documented default.
    public init(
        acceptedTypes: Set<AttestationType> = Set(AttestationType.allCases), requireTrustedAttestation: Bool = false,
        allowedAAGUIDs: Set<AAGUID>? = nil, deniedAAGUIDs: Set<AAGUID> = [],
        androidKeyEnforcement: AndroidKeyEnforcement = .teeOrSoftware, allowSHA1TPMAttestation: Bool = true,
        requireSafetyNetCTSProfileMatch: Bool = true, safetyNetMaxAge: Double = 60
    ) {
        self.allowSHA1TPMAttestation = allowSHA1TPMAttestation
        self.acceptedTypes = acceptedTypes
        self.requireTrustedAttestation = requireTrustedAttestation
        self.allowedAAGUIDs = allowedAAGUIDs
        self.deniedAAGUIDs = deniedAAGUIDs
        self.androidKeyEnforcement = androidKeyEnforcement
        self.requireSafetyNetCTSProfileMatch = requireSafetyNetCTSProfileMatch
        self.safetyNetMaxAge = safetyNetMaxAge
    }
}

/// Every verification policy of a relying party, each with a safe default.
public struct VerificationPolicy: Sendable, Equatable {
    /// Default `.preferred`: UV is requested, and not required.
    public var userVerification: UserVerificationRequirement
    /// Default `.deny`.
    public var crossOrigin: CrossOriginPolicy
    /// Default `.reject`.
    public var counter: CounterPolicy
    /// Algorithms offered in `pubKeyCredParams`, in preference order. Default:
    /// ES256, EdDSA, ES384, ES512, PS256, RS256 (RS256 for Windows Hello).
    public var algorithms: [COSEAlgorithm]
    /// Allows RS1 (RSASSA-PKCS1-v1_5 with SHA-1), which is broken for
    /// collision resistance. Default false. Some old TPMs need it.
    public var allowInsecureRS1: Bool
    /// What attestation is accepted. Default: every type, no trust required.
    public var attestation: AttestationPolicy
    /// When the options required a discoverable credential and the client reports
    /// `credProps.rk: false`: refuse the registration (`discoverable_credential_missing`, the
    /// default) or, when false, store it with ``CredentialProperties/discoverable`` false.
    public var refuseNonDiscoverableWhenRequired: Bool
    /// Whether a credential that a ``CredentialAudit`` flagged (FIDO metadata reports its
    /// authenticator compromised) still signs in. Default `.allow`: it does, and the result
    /// says so (``AuthenticationResult/flag``, ``RiskSignal/authenticatorCompromised``).
    public var flaggedCredentials: FlaggedCredentialPolicy
    /// The AppID of a former U2F deployment (`https://example.com/app-id.json`) whose
    /// credentials may still sign in through the `appid` extension. Default nil: an
    /// `appid` input is dropped from options, and every assertion is over the RP ID.
    public var u2fAppID: String?

    /// A policy; every parameter defaults to the property's documented default.
    public init(
        userVerification: UserVerificationRequirement = .preferred,
        crossOrigin: CrossOriginPolicy = .deny,
        counter: CounterPolicy = .reject,
        algorithms: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .ps256, .rs256],
        allowInsecureRS1: Bool = false,
        attestation: AttestationPolicy = AttestationPolicy(),
        refuseNonDiscoverableWhenRequired: Bool = true,
        u2fAppID: String? = nil,
        flaggedCredentials: FlaggedCredentialPolicy = .allow
    ) {
        self.userVerification = userVerification
        self.crossOrigin = crossOrigin
        self.counter = counter
        self.algorithms = algorithms
        self.allowInsecureRS1 = allowInsecureRS1
        self.attestation = attestation
        self.refuseNonDiscoverableWhenRequired = refuseNonDiscoverableWhenRequired
        self.u2fAppID = u2fAppID
        self.flaggedCredentials = flaggedCredentials
    }
}

/// What to do when a credential that a re-audit flagged signs in.
public enum FlaggedCredentialPolicy: Sendable, Equatable {
    /// It signs in; the result carries the flag and ``RiskSignal/authenticatorCompromised``. The default.
    case allow
    /// It is refused (`credential_flagged`).
    case refuse
}

/// Signals a ceremony raises for the relying party's risk engine.
public enum RiskSignal: String, Sendable, Hashable {
    /// The sign counter did not increase: the authenticator may have been cloned.
    case possibleClonedAuthenticator = "possible_cloned_authenticator"
    /// The backup state (BS) changed since the credential was last used.
    case backupStateChanged = "backup_state_changed"
    /// The attestation is not trusted (no trust anchor matched).
    case attestationUntrusted = "attestation_untrusted"
    /// The user was present but not verified.
    case userNotVerified = "user_not_verified"
    /// FIDO metadata reports the credential's authenticator compromised (a re-audit flagged it).
    case authenticatorCompromised = "authenticator_compromised"
}
