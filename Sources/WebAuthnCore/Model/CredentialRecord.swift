public import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// A registered credential: the credential record of WebAuthn L3 §4, plus
/// the owner and bookkeeping a relying party keeps.
public struct CredentialRecord: Sendable {
    /// The credential ID.
    public let id: [UInt8]
    /// The user handle (`user.id`) of the account that owns the credential.
    public let userHandle: [UInt8]
    /// The credential public key, ready to verify.
    public let publicKey: COSEKey
    /// The stored signature counter.
    public var signCount: UInt32
    /// Transports reported at registration.
    public var transports: [AuthenticatorTransport]
    /// Whether the credential has ever been used with user verification.
    public var uvInitialized: Bool
    /// BE at registration; must not change.
    public let backupEligible: Bool
    /// BS as last seen.
    public var backupState: Bool
    /// The authenticator model, all zero when not disclosed.
    public let aaguid: AAGUID
    /// The attestation statement format it was registered with.
    public let attestationFormat: AttestationFormat
    /// When the credential was registered.
    public let createdAt: Date
    /// When the credential last authenticated; nil if never.
    public var lastUsedAt: Date?
    /// The name its owner gave it ("Work laptop"), nil for none: shown in account settings.
    public var name: String?
    /// What the registration established beyond the key: discoverable, attachment,
    /// credProtect level, PRF and large-blob support, minimum PIN length.
    public var properties: CredentialProperties
    /// The attestation certificates the registration presented (DER, leaf first; when
    /// trusted, the validated path; a compound attestation's other statements' certificates
    /// follow, at most 8 in all): kept so that a later metadata change can re-judge the
    /// credential (``CredentialAudit``). Empty for `none` and self attestation.
    public let attestationChain: [[UInt8]]
    /// Set by a ``CredentialAudit`` when FIDO metadata reports the credential's
    /// authenticator compromised; nil otherwise. Whether a flagged credential still signs
    /// in is ``VerificationPolicy/flaggedCredentials``.
    public var flag: CredentialFlag?

    /// A credential record. The engine builds these from verified registrations;
    /// stores build them from their rows. Each parameter sets the property of the same name.
    public init(
        id: [UInt8], userHandle: [UInt8], publicKey: COSEKey, signCount: UInt32, transports: [AuthenticatorTransport] = [],
        uvInitialized: Bool, backupEligible: Bool, backupState: Bool, aaguid: AAGUID = .zero,
        attestationFormat: AttestationFormat = .none, createdAt: Date, lastUsedAt: Date? = nil, name: String? = nil,
        properties: CredentialProperties = CredentialProperties(), attestationChain: [[UInt8]] = [], flag: CredentialFlag? = nil
    ) {
        self.id = id
        self.userHandle = userHandle
        self.publicKey = publicKey
        self.signCount = signCount
        self.transports = transports
        self.uvInitialized = uvInitialized
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.aaguid = aaguid
        self.attestationFormat = attestationFormat
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.name = name
        self.properties = properties
        self.attestationChain = attestationChain
        self.flag = flag
    }
}

/// The account a credential is registered for (`PublicKeyCredentialUserEntity`).
public struct UserEntity: Sendable, Equatable {
    /// The user handle: 1 to 64 opaque bytes, with no personal information.
    public let id: [UInt8]
    /// The user name (`user.name`), such as an email address or a handle.
    public let name: String
    /// The human-palatable name (`user.displayName`); the name when none was given.
    public let displayName: String

    /// An account with the given user handle.
    ///
    /// - Parameters:
    ///   - id: The user handle, 1 to 64 opaque bytes.
    ///   - name: The user name.
    ///   - displayName: The display name; nil: the name.
    /// - Throws: `configuration_invalid` when `id` is empty or longer than 64 bytes.
    public init(id: [UInt8], name: String, displayName: String? = nil) throws(WebAuthnError) {
        guard (1...64).contains(id.count) else {
            throw WebAuthnError(.configurationInvalid, "a user handle must be 1 to 64 bytes; got \(id.count)")
        }
        self.id = id
        self.name = name
        self.displayName = displayName ?? name
    }

    /// A new account with a random 32-byte user handle.
    public static func new(name: String, displayName: String? = nil) -> UserEntity {
        try! UserEntity(id: SecureRandom.bytes(32), name: name, displayName: displayName)
    }
}

/// A credential descriptor for `excludeCredentials` / `allowCredentials`.
public struct CredentialDescriptor: Sendable, Equatable {
    /// The credential ID.
    public let id: [UInt8]
    /// Transport hints for the client (empty: none).
    public let transports: [AuthenticatorTransport]
    /// A descriptor of the credential `id` with its transport hints.
    public init(id: [UInt8], transports: [AuthenticatorTransport] = []) {
        self.id = id
        self.transports = transports
    }
}
