package import _WebAuthnEncoding

extension COSEAlgorithm {
    /// The hash used with the algorithm (nil for EdDSA and ML-DSA, which hash internally).
    package var digest: DigestAlgorithm? {
        switch self {
        case .es256, .esp256, .es256K, .rs256, .ps256: return .sha256
        case .es384, .esp384, .rs384, .ps384: return .sha384
        case .es512, .esp512, .rs512, .ps512: return .sha512
        case .rs1: return .sha1
        default: return nil
        }
    }
}
