public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The flags byte of authenticator data (WebAuthn L3 §6.1).
public struct AuthenticatorFlags: OptionSet, Sendable, Hashable {
    /// The flags byte.
    public let rawValue: UInt8
    /// Flags from the raw flags byte; bits without a name (RFU) are kept.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// UP: the user was present.
    public static let userPresent = AuthenticatorFlags(rawValue: 0x01)
    /// UV: the user was verified.
    public static let userVerified = AuthenticatorFlags(rawValue: 0x04)
    /// BE: the credential may be backed up (a multi-device credential).
    public static let backupEligible = AuthenticatorFlags(rawValue: 0x08)
    /// BS: the credential is currently backed up.
    public static let backupState = AuthenticatorFlags(rawValue: 0x10)
    /// AT: attested credential data follows.
    public static let attestedCredentialData = AuthenticatorFlags(rawValue: 0x40)
    /// ED: extension data follows.
    public static let extensionData = AuthenticatorFlags(rawValue: 0x80)
}

/// A 16-byte authenticator model identifier.
public struct AAGUID: Sendable, Hashable, CustomStringConvertible {
    /// The 16 bytes.
    public let bytes: [UInt8]
    /// An AAGUID from its bytes; nil unless there are exactly 16.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }
    /// Parses the canonical 8-4-4-4-12 text form.
    public init?(_ string: String) {
        guard let b = Bytes.fromHex(string.replacingOccurrences(of: "-", with: "")), b.count == 16 else { return nil }
        self.bytes = b
    }
    /// The all-zero AAGUID, which authenticators use when they do not disclose their model.
    public static let zero = AAGUID(bytes: [UInt8](repeating: 0, count: 16))!
    /// Whether every byte is zero (the model is not disclosed).
    public var isZero: Bool { bytes.allSatisfy { $0 == 0 } }
    /// The canonical 8-4-4-4-12 lowercase form.
    public var description: String {
        let h = Bytes.hex(bytes)
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }
}

/// Attested credential data (WebAuthn L3 §6.5.2).
public struct AttestedCredentialData: Sendable {
    /// The authenticator model (all zero when not disclosed).
    public let aaguid: AAGUID
    /// The credential ID (1 to 1023 bytes, checked by the ceremony).
    public let credentialId: [UInt8]
    /// The credential public key, parsed and ready to verify.
    public let publicKey: COSEKey
}

/// Authenticator data (WebAuthn L3 §6.1), parsed strictly: every byte is
/// accounted for, and the AT and ED flags must match what follows.
public struct AuthenticatorData: Sendable {
    /// Named offsets of the fixed-size part.
    enum Layout {
        static let rpIdHash = 0..<32
        static let flags = 32
        static let signCount = 33..<37
        static let fixedLength = 37
        static let aaguidLength = 16
        static let credentialIdLengthSize = 2
        /// WebAuthn L3 §7.1 step 26 limits credential IDs to 1023 bytes (checked
        /// by the ceremony, not the parser: the 16-bit length bounds parsing).
        static let maxCredentialIdLength = 1023
    }

    /// The raw bytes, as signed by the authenticator.
    public let bytes: [UInt8]
    /// SHA-256 of the RP ID the authenticator scoped the credential to (32 bytes).
    public let rpIdHash: [UInt8]
    /// The flags byte.
    public let flags: AuthenticatorFlags
    /// The signature counter (big-endian in the data; 0 when the authenticator keeps none).
    public let signCount: UInt32
    /// The attested credential data, present when the AT flag is set (registration).
    public let attestedCredentialData: AttestedCredentialData?
    /// Authenticator extension outputs (a CBOR map), when ED is set.
    package let extensions: CBOR?

    /// UP: the user was present.
    public var userPresent: Bool { flags.contains(.userPresent) }
    /// UV: the user was verified.
    public var userVerified: Bool { flags.contains(.userVerified) }
    /// BE: the credential may be backed up.
    public var backupEligible: Bool { flags.contains(.backupEligible) }
    /// BS: the credential is currently backed up.
    public var backedUp: Bool { flags.contains(.backupState) }

    /// Parses authenticator data. Throws `authenticator_data_malformed`,
    /// `credential_id_too_long`, `cose_key_invalid` or a CBOR error.
    public init(bytes: [UInt8]) throws(WebAuthnError) { try self.init(bytes: bytes, limits: CBORLimits()) }

    package init(bytes: [UInt8], limits: CBORLimits) throws(WebAuthnError) {
        guard bytes.count >= Layout.fixedLength else {
            throw WebAuthnError(.authenticatorDataMalformed, "authenticator data is \(bytes.count) bytes; at least \(Layout.fixedLength) are required")
        }
        self.bytes = bytes
        rpIdHash = Array(bytes[Layout.rpIdHash])
        flags = AuthenticatorFlags(rawValue: bytes[Layout.flags])
        signCount = Bytes.readBigEndian(bytes, at: Layout.signCount.lowerBound, as: UInt32.self)
        var offset = Layout.fixedLength

        if flags.contains(.attestedCredentialData) {
            let headerEnd = offset + Layout.aaguidLength + Layout.credentialIdLengthSize
            guard bytes.count >= headerEnd else {
                throw WebAuthnError(.authenticatorDataMalformed, "attested credential data is truncated")
            }
            guard let aaguid = AAGUID(bytes: Array(bytes[offset..<offset + Layout.aaguidLength])) else {
                throw WebAuthnError(.authenticatorDataMalformed, "the AAGUID is not 16 bytes")  // cannot happen: the range is 16 bytes
            }
            offset += Layout.aaguidLength
            let idLength = Int(Bytes.readBigEndian(bytes, at: offset, as: UInt16.self))
            offset += Layout.credentialIdLengthSize
            guard idLength > 0, bytes.count >= offset + idLength else {
                throw WebAuthnError(.authenticatorDataMalformed, "credential ID length \(idLength) does not fit the authenticator data")
            }
            let credentialId = Array(bytes[offset..<offset + idLength])
            offset += idLength
            guard offset < bytes.count else {
                throw WebAuthnError(.authenticatorDataMalformed, "credential public key is missing")
            }
            let (keyItem, keyLength) = try CBORDecoder.decodePrefix(bytes, from: offset, limits: limits)
            let key = try COSEKey(cbor: keyItem, bytes: Array(bytes[offset..<offset + keyLength]))
            offset += keyLength
            attestedCredentialData = AttestedCredentialData(aaguid: aaguid, credentialId: credentialId, publicKey: key)
        } else {
            attestedCredentialData = nil
        }

        if flags.contains(.extensionData) {
            guard offset < bytes.count else {
                throw WebAuthnError(.authenticatorDataMalformed, "the ED flag is set but there are no extensions")
            }
            let (ext, length) = try CBORDecoder.decodePrefix(bytes, from: offset, limits: limits)
            guard case .map = ext else {
                throw WebAuthnError(.authenticatorDataMalformed, "authenticator extensions are not a CBOR map")
            }
            extensions = ext
            offset += length
        } else {
            extensions = nil
        }

        guard offset == bytes.count else {
            throw WebAuthnError(.authenticatorDataMalformed, "\(bytes.count - offset) bytes left over after the authenticator data (check the AT and ED flags)")
        }
    }
}
