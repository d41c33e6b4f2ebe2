public import _WebAuthnEncoding
package import _WebAuthnCrypto

/// A credential public key in COSE_Key form (RFC 9052 §7, WebAuthn L3 §6.5.1.1),
/// validated and imported into OpenSSL.
///
/// Accepted: EC2 on P-256/P-384/P-521 with ES256/ES384/ES512 or their fully
/// specified names ESP256/ESP384/ESP512, and on secp256k1 with ES256K (exact
/// coordinate lengths, point on the curve); AKP ML-DSA-44/65/87 when the linked
/// OpenSSL has ML-DSA (3.5 or newer, found at run time); OKP Ed25519/Ed448 with EdDSA (or
/// the fully specified Ed25519/Ed448), and RSA (2048 to 8192 bits) with
/// RS256/384/512, PS256/384/512 and RS1. The algorithm must match the key
/// type, and private key parameters are refused.
public struct COSEKey: Sendable {
    /// COSE key types.
    public enum KeyType: Int, Sendable {
        /// `OKP` (1): octet key pairs (Ed25519, Ed448); `EC2` (2): elliptic-curve keys
        /// with x and y (P-256, P-384, P-521, secp256k1); `RSA` (3); `AKP` (7): ML-DSA.
        case okp = 1, ec2 = 2, rsa = 3, akp = 7
    }

    /// COSE_Key labels (RFC 9052 §7.1, RFC 9053, RFC 8230).
    typealias Label = COSE.Label

    /// A key's public parameters, as parsed from its COSE encoding.
    package enum Parameters: Sendable {
        case ec2(curve: ECCurve, x: [UInt8], y: [UInt8])
        case okp(curve: OKPCurve, x: [UInt8])
        /// Big-endian modulus and public exponent, as encoded (leading zeros kept).
        case rsa(n: [UInt8], e: [UInt8])
        /// An ML-DSA public key (FIPS 204 encoding).
        case akp(MLDSAParameterSet, [UInt8])
    }

    /// The key type (`kty`).
    public var keyType: KeyType {
        switch parameters {
        case .ec2: return .ec2
        case .okp: return .okp
        case .rsa: return .rsa
        case .akp: return .akp
        }
    }
    /// The algorithm (`alg`); it matches the key type and curve.
    public let algorithm: COSEAlgorithm
    /// The parameters the key was decoded from, kept so that no check decodes `bytes` again.
    package let parameters: Parameters
    /// The COSE encoding exactly as the authenticator produced it.
    public let bytes: [UInt8]
    /// The key, imported and ready to verify.
    package let publicKey: PublicKey

    /// Decodes and validates a COSE key from its CBOR encoding.
    public init(bytes: [UInt8]) throws(WebAuthnError) {
        let item = try CBORDecoder.decode(bytes)
        try self.init(cbor: item, bytes: bytes)
    }

    init(cbor: CBOR, bytes: [UInt8]) throws(WebAuthnError) {
        guard case .map(let pairs) = cbor else { throw Self.invalid("the credential public key is not a CBOR map") }
        for p in pairs where p.key.intValue == nil {
            throw Self.invalid("COSE key labels must be integers")
        }
        guard let ktyValue = cbor[Label.kty]?.intValue else { throw Self.invalid("kty (1) is missing") }
        guard let algValue = cbor[Label.alg]?.intValue else { throw Self.invalid("alg (3) is missing") }
        let alg = COSEAlgorithm(algValue)
        self.bytes = bytes
        self.algorithm = alg

        switch ktyValue {
        case COSE.KeyType.ec2:
            guard cbor[Label.d] == nil else { throw Self.invalid("the key contains private key material (d)") }
            guard let crvValue = cbor[Label.crv]?.intValue, let curve = ECCurve(rawValue: crvValue) else {
                throw WebAuthnError(.algorithmUnsupported, "EC2 curve \(cbor[Label.crv]?.intValue.map(String.init) ?? "missing") is not supported")
            }
            guard let x = cbor[Label.x]?.bytesValue else { throw Self.invalid("x (-2) is missing or not a byte string") }
            guard let y = cbor[Label.y]?.bytesValue else { throw Self.invalid("y (-3) is missing or not a byte string (compressed points are not accepted)") }
            let expected = curve.algorithm
            guard alg == expected || alg == curve.fullySpecifiedAlgorithm else {
                throw Self.mismatch(
                    alg, "an EC2 \(curve.name) key",
                    expected: ([expected] + [curve.fullySpecifiedAlgorithm].compactMap { $0 }).map(\.name).joined(separator: " or "))
            }
            publicKey = try PublicKey.ec(curve: curve, x: x, y: y)
            parameters = .ec2(curve: curve, x: x, y: y)
        case COSE.KeyType.okp:
            guard cbor[Label.d] == nil else { throw Self.invalid("the key contains private key material (d)") }
            guard let crvValue = cbor[Label.crv]?.intValue, let curve = OKPCurve(rawValue: crvValue) else {
                throw WebAuthnError(.algorithmUnsupported, "OKP curve \(cbor[Label.crv]?.intValue.map(String.init) ?? "missing") is not supported")
            }
            guard let x = cbor[Label.x]?.bytesValue else { throw Self.invalid("x (-2) is missing or not a byte string") }
            let fullySpecified: COSEAlgorithm = curve == .ed25519 ? .ed25519 : .ed448
            guard alg == .edDSA || alg == fullySpecified else {
                throw Self.mismatch(alg, "an OKP \(curve.name) key", expected: "EdDSA (-8) or \(fullySpecified)")
            }
            publicKey = try PublicKey.okp(curve: curve, x: x)
            parameters = .okp(curve: curve, x: x)
        case COSE.KeyType.rsa:
            guard cbor[Label.rsaP] == nil, cbor[Label.rsaD] == nil else { throw Self.invalid("the key contains private key material") }
            guard let n = cbor[Label.n]?.bytesValue, let e = cbor[Label.e]?.bytesValue else {
                throw Self.invalid("RSA n (-1) or e (-2) is missing or not a byte string")
            }
            guard [.rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .rs1].contains(alg) else {
                throw Self.mismatch(alg, "an RSA key", expected: "RS256/384/512, PS256/384/512 or RS1")
            }
            publicKey = try PublicKey.rsa(n: n, e: e)
            parameters = .rsa(n: n, e: e)
        case COSE.KeyType.akp:
            guard let set = MLDSAParameterSet(rawValue: algValue) else {
                throw WebAuthnError(.algorithmUnsupported, "AKP key with alg \(alg): only ML-DSA-44, -65 and -87 are supported")
            }
            guard MLDSAParameterSet.available else {
                throw WebAuthnError(
                    .algorithmUnsupported, "\(set.name) needs OpenSSL 3.5 or newer; this process runs \(OpenSSL.versionText), which has no ML-DSA")
            }
            guard cbor[Label.akpPriv] == nil else { throw Self.invalid("the key contains private key material (priv)") }
            guard let pub = cbor[Label.akpPub]?.bytesValue else { throw Self.invalid("pub (-1) is missing or not a byte string") }
            publicKey = try PublicKey.mlDSA(set, publicKey: pub)
            parameters = .akp(set, pub)
        default:
            throw WebAuthnError(.algorithmUnsupported, "COSE key type \(ktyValue) is not supported")
        }
    }

    /// For an EC2 key: 0x04 ‖ x ‖ y.
    var uncompressedPoint: [UInt8]? {
        guard case .ec2(_, let x, let y) = parameters else { return nil }
        return [ECCurve.uncompressedPointPrefix] + x + y
    }

    private static func invalid(_ message: String) -> WebAuthnError {
        WebAuthnError(.coseKeyInvalid, message)
    }

    private static func mismatch(_ alg: COSEAlgorithm, _ key: String, expected: String) -> WebAuthnError {
        let known = COSEAlgorithm.supported.contains(alg)
        return WebAuthnError(known ? .coseKeyInvalid : .algorithmUnsupported, "alg \(alg) does not match \(key); expected \(expected)")
    }
}
