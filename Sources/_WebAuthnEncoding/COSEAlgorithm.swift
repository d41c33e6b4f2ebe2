/// A COSE algorithm identifier (IANA "COSE Algorithms" registry).
public struct COSEAlgorithm: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The registry value, such as -7 for ES256.
    public let rawValue: Int
    /// The algorithm with this registry value (known to the engine or not).
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// The algorithm with this registry value (known to the engine or not).
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    /// ECDSA with SHA-256, on P-256 keys (-7).
    public static let es256 = COSEAlgorithm(-7)
    /// ECDSA with SHA-384, on P-384 keys (-35).
    public static let es384 = COSEAlgorithm(-35)
    /// ECDSA with SHA-512, on P-521 keys (-36).
    public static let es512 = COSEAlgorithm(-36)
    /// ECDSA with SHA-256 on secp256k1 keys (-47, RFC 8812).
    public static let es256K = COSEAlgorithm(-47)
    /// ECDSA with SHA-256 on P-256 keys, fully specified (-9, RFC 9864): ES256 by its unambiguous name.
    public static let esp256 = COSEAlgorithm(-9)
    /// ECDSA with SHA-384 on P-384 keys, fully specified (-51, RFC 9864).
    public static let esp384 = COSEAlgorithm(-51)
    /// ECDSA with SHA-512 on P-521 keys, fully specified (-52, RFC 9864).
    public static let esp512 = COSEAlgorithm(-52)
    /// ML-DSA-44 (-48, FIPS 204): verified only when the linked OpenSSL is 3.5 or newer.
    public static let mlDSA44 = COSEAlgorithm(-48)
    /// ML-DSA-65 (-49, FIPS 204): verified only when the linked OpenSSL is 3.5 or newer.
    public static let mlDSA65 = COSEAlgorithm(-49)
    /// ML-DSA-87 (-50, FIPS 204): verified only when the linked OpenSSL is 3.5 or newer.
    public static let mlDSA87 = COSEAlgorithm(-50)
    /// EdDSA; the curve (Ed25519 or Ed448) comes from the key.
    public static let edDSA = COSEAlgorithm(-8)
    /// Ed25519, fully specified (RFC 9864).
    public static let ed25519 = COSEAlgorithm(-19)
    /// Ed448, fully specified (RFC 9864).
    public static let ed448 = COSEAlgorithm(-53)
    /// RSASSA-PKCS1-v1_5 with SHA-256 (-257), as Windows Hello uses.
    public static let rs256 = COSEAlgorithm(-257)
    /// RSASSA-PKCS1-v1_5 with SHA-384 (-258).
    public static let rs384 = COSEAlgorithm(-258)
    /// RSASSA-PKCS1-v1_5 with SHA-512 (-259).
    public static let rs512 = COSEAlgorithm(-259)
    /// RSASSA-PSS with SHA-256 (-37).
    public static let ps256 = COSEAlgorithm(-37)
    /// RSASSA-PSS with SHA-384 (-38).
    public static let ps384 = COSEAlgorithm(-38)
    /// RSASSA-PSS with SHA-512 (-39).
    public static let ps512 = COSEAlgorithm(-39)
    /// RSASSA-PKCS1-v1_5 with SHA-1. Accepted only when a policy allows it.
    public static let rs1 = COSEAlgorithm(-65535)

    /// Every algorithm the engine can verify, RS1 included (verified only when a policy allows
    /// it). Not the default offer: `VerificationPolicy`'s default `algorithms` is ES256, EdDSA,
    /// ES384, ES512, PS256, RS256; offer this list only with RS1 allowed, or a registration with
    /// an RS1 key is refused (`algorithm_not_allowed`).
    public static let supported: [COSEAlgorithm] = [
        .es256, .esp256, .edDSA, .ed25519, .es384, .esp384, .es512, .esp512, .es256K, .ed448, .ps256, .ps384, .ps512, .rs256, .rs384, .rs512, .rs1,
    ]

    /// ML-DSA-44, -65 and -87: supported when the linked OpenSSL has ML-DSA (3.5 or newer; checked at run time).
    public static let postQuantum: [COSEAlgorithm] = [.mlDSA44, .mlDSA65, .mlDSA87]

    /// The registry name, such as `ES256`; `COSE(<value>)` for an algorithm the engine does not know.
    public var name: String {
        switch self {
        case .es256: return "ES256"
        case .es384: return "ES384"
        case .es512: return "ES512"
        case .es256K: return "ES256K"
        case .esp256: return "ESP256"
        case .esp384: return "ESP384"
        case .esp512: return "ESP512"
        case .mlDSA44: return "ML-DSA-44"
        case .mlDSA65: return "ML-DSA-65"
        case .mlDSA87: return "ML-DSA-87"
        case .edDSA: return "EdDSA"
        case .ed25519: return "Ed25519"
        case .ed448: return "Ed448"
        case .rs256: return "RS256"
        case .rs384: return "RS384"
        case .rs512: return "RS512"
        case .ps256: return "PS256"
        case .ps384: return "PS384"
        case .ps512: return "PS512"
        case .rs1: return "RS1"
        default: return "COSE(\(rawValue))"
        }
    }

    /// The name and value, such as `ES256 (-7)`.
    public var description: String { "\(name) (\(rawValue))" }
}
