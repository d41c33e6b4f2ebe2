internal import _WebAuthnEncoding

// The string-valued enumerations of WebAuthn, as extensible values in the manner of
// `COSEAlgorithm`: static constants for the values the spec defines, and any other value
// kept as given (clients ignore values they do not know; new ones keep appearing).
// Equality and hashing are over the UTF-8 bytes of the raw value, not Swift's canonical
// string equivalence, so a value compares the way browsers and authenticators compare it.

/// Whether the relying party wants a client-side discoverable credential (a passkey):
/// `residentKey` of `authenticatorSelection` (WebAuthn L3 §5.4.6).
///
/// A value outside the spec's is kept as given. Two values are equal when their raw
/// values are the same UTF-8 bytes.
public struct ResidentKeyRequirement: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The value as it is written in JSON or CBOR, such as `required`.
    public let rawValue: String
    /// A value, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A value written as a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `discouraged`: a server-side credential is preferred; a discoverable one is acceptable.
    public static let discouraged: Self = "discouraged"
    /// `preferred`: a discoverable credential is preferred; a server-side one is acceptable.
    public static let preferred: Self = "preferred"
    /// `required`: a discoverable credential, or the ceremony fails on the client.
    public static let required: Self = "required"

    /// The values WebAuthn L3 defines, in its order.
    package static let specified: [Self] = [.discouraged, .preferred, .required]

    /// The raw value.
    public var description: String { rawValue }
    /// Whether the raw values are the same UTF-8 bytes.
    public static func == (lhs: Self, rhs: Self) -> Bool { Bytes.sameUTF8(lhs.rawValue, rhs.rawValue) }
    /// Hashes the raw value's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) { Bytes.hashUTF8(rawValue, into: &hasher) }
}

/// How an authenticator is attached to the client: `authenticatorAttachment` of
/// `authenticatorSelection` and of a credential (WebAuthn L3 §5.4.5).
///
/// A value outside the spec's is kept as given. Two values are equal when their raw
/// values are the same UTF-8 bytes.
public struct AuthenticatorAttachment: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The value as it is written in JSON or CBOR, such as `platform`.
    public let rawValue: String
    /// A value, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A value written as a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `platform`: built into the client device (a platform authenticator).
    public static let platform: Self = "platform"
    /// `cross-platform`: removable or reached over a transport (a roaming authenticator, such as a security key or a phone).
    public static let crossPlatform: Self = "cross-platform"

    /// The values WebAuthn L3 defines, in its order.
    package static let specified: [Self] = [.platform, .crossPlatform]

    /// The raw value.
    public var description: String { rawValue }
    /// Whether the raw values are the same UTF-8 bytes.
    public static func == (lhs: Self, rhs: Self) -> Bool { Bytes.sameUTF8(lhs.rawValue, rhs.rawValue) }
    /// Hashes the raw value's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) { Bytes.hashUTF8(rawValue, into: &hasher) }
}

/// What attestation the relying party asks for: `attestation` of creation options
/// (WebAuthn L3 §5.4.7).
///
/// A value outside the spec's is kept as given. Two values are equal when their raw
/// values are the same UTF-8 bytes.
public struct AttestationConveyancePreference: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The value as it is written in JSON or CBOR, such as `direct`.
    public let rawValue: String
    /// A value, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A value written as a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `none`: no attestation: the client may replace it with `none`.
    public static let none: Self = "none"
    /// `indirect`: attestation the client may anonymise.
    public static let indirect: Self = "indirect"
    /// `direct`: the authenticator's attestation, as it made it.
    public static let direct: Self = "direct"
    /// `enterprise`: attestation that may identify the individual authenticator (managed deployments only).
    public static let enterprise: Self = "enterprise"

    /// The values WebAuthn L3 defines, in its order.
    package static let specified: [Self] = [.none, .indirect, .direct, .enterprise]

    /// The raw value.
    public var description: String { rawValue }
    /// Whether the raw values are the same UTF-8 bytes.
    public static func == (lhs: Self, rhs: Self) -> Bool { Bytes.sameUTF8(lhs.rawValue, rhs.rawValue) }
    /// Hashes the raw value's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) { Bytes.hashUTF8(rawValue, into: &hasher) }
}

/// A hint to the client about the authenticator to offer first: an element of
/// `hints` of creation and request options (WebAuthn L3 §5.8.7).
///
/// A value outside the spec's is kept as given. Two values are equal when their raw
/// values are the same UTF-8 bytes.
public struct PublicKeyCredentialHint: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The value as it is written in JSON or CBOR, such as `security-key`.
    public let rawValue: String
    /// A value, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A value written as a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `security-key`: a physical security key.
    public static let securityKey: Self = "security-key"
    /// `client-device`: the platform authenticator of the device in use.
    public static let clientDevice: Self = "client-device"
    /// `hybrid`: another device, such as a phone, over the hybrid transport.
    public static let hybrid: Self = "hybrid"
    /// The values the spec defines.
    package static let specified: [Self] = [.securityKey, .clientDevice, .hybrid]

    /// The raw value.
    public var description: String { rawValue }
    /// Whether the raw values are the same UTF-8 bytes.
    public static func == (lhs: Self, rhs: Self) -> Bool { Bytes.sameUTF8(lhs.rawValue, rhs.rawValue) }
    /// Hashes the raw value's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) { Bytes.hashUTF8(rawValue, into: &hasher) }
}

/// A way the client can reach an authenticator: an element of `transports` of a
/// registration response and of credential descriptors (WebAuthn L3 §5.8.4).
///
/// A value outside the spec's is kept as given. Two values are equal when their raw
/// values are the same UTF-8 bytes.
public struct AuthenticatorTransport: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The value as it is written in JSON or CBOR, such as `usb`.
    public let rawValue: String
    /// A value, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A value written as a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `usb`: removable USB.
    public static let usb: Self = "usb"
    /// `nfc`: near field communication.
    public static let nfc: Self = "nfc"
    /// `ble`: bluetooth Low Energy.
    public static let ble: Self = "ble"
    /// `smart-card`: an ISO/IEC 7816 smart card with contacts.
    public static let smartCard: Self = "smart-card"
    /// `hybrid`: hybrid: another device (a phone) through the client, with proximity checked over BLE.
    public static let hybrid: Self = "hybrid"
    /// `internal`: built into the client device.
    public static let `internal`: Self = "internal"

    /// The raw value.
    public var description: String { rawValue }
    /// Whether the raw values are the same UTF-8 bytes.
    public static func == (lhs: Self, rhs: Self) -> Bool { Bytes.sameUTF8(lhs.rawValue, rhs.rawValue) }
    /// Hashes the raw value's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) { Bytes.hashUTF8(rawValue, into: &hasher) }
}

/// An attestation statement format identifier: `fmt` of an attestation object
/// (WebAuthn L3 §8, IANA "WebAuthn Attestation Statement Format Identifiers").
///
/// A value outside the spec's is kept as given. Two values are equal when their raw
/// values are the same UTF-8 bytes.
public struct AttestationFormat: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The value as it is written in JSON or CBOR, such as `packed`.
    public let rawValue: String
    /// A value, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A value written as a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `none`: no attestation statement (§8.7).
    public static let none: Self = "none"
    /// `packed`: the WebAuthn-optimised format (§8.2).
    public static let packed: Self = "packed"
    /// `tpm`: tPM 2.0 attestation (§8.3).
    public static let tpm: Self = "tpm"
    /// `android-key`: android key attestation (§8.4).
    public static let androidKey: Self = "android-key"
    /// `android-safetynet`: android SafetyNet (§8.5).
    public static let androidSafetyNet: Self = "android-safetynet"
    /// `fido-u2f`: fIDO U2F (§8.6).
    public static let fidoU2F: Self = "fido-u2f"
    /// `apple`: apple anonymous attestation (§8.8).
    public static let apple: Self = "apple"
    /// `compound`: several statements of other formats (§8.9).
    public static let compound: Self = "compound"
    /// The formats the spec defines.
    package static let specified: [Self] = [.none, .packed, .tpm, .androidKey, .androidSafetyNet, .fidoU2F, .apple, .compound]

    /// The raw value.
    public var description: String { rawValue }
    /// Whether the raw values are the same UTF-8 bytes.
    public static func == (lhs: Self, rhs: Self) -> Bool { Bytes.sameUTF8(lhs.rawValue, rhs.rawValue) }
    /// Hashes the raw value's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) { Bytes.hashUTF8(rawValue, into: &hasher) }
}
