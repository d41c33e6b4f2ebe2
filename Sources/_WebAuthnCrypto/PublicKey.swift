internal import COpenSSL
internal import NIOConcurrencyHelpers
package import _WebAuthnEncoding

/// An owned OpenSSL public key, ready to verify signatures.
///
/// Importing a key costs about a third of a P-256 verification, so a
/// credential record keeps its `PublicKey` and reuses it. The key also keeps
/// one verification context it can reuse; concurrent callers that find it in
/// use make a temporary one, so the type is safe to share between threads.
package final class PublicKey: @unchecked Sendable {
    /// The key's type and size.
    package enum Kind: Sendable, Equatable, CustomStringConvertible {
        case ec(ECCurve)
        case rsa(bits: Int)
        case okp(OKPCurve)
        case mlDSA(MLDSAParameterSet)

        package var description: String {
            switch self {
            case .ec(let c): return "EC \(c.name)"
            case .rsa(let bits): return "RSA-\(bits)"
            case .okp(let c): return c.name
            case .mlDSA(let p): return p.name
            }
        }
    }

    /// Owned `EVP_PKEY *`.
    package let pkey: OpaquePointer
    package let kind: Kind
    /// Owned `EVP_PKEY_CTX *` initialised for verification, keyed by algorithm.
    /// NIO's pthread lock, not `Synchronization.Mutex`: ThreadSanitizer cannot see the futex
    /// of a Linux `Mutex`, and reported the hand-over of a context between threads as a race.
    private let cachedContext = NIOLockedValueBox<CachedContext?>(nil)

    /// An owned verification context; only ever used by one thread at a time.
    private struct CachedContext: @unchecked Sendable {
        let alg: Int
        let ctx: OpaquePointer
    }

    /// Takes ownership of `pkey` (freed here when it is refused). Every key
    /// passes the sanity checks of ``KeySanity`` first.
    package init(taking pkey: OpaquePointer) throws(WebAuthnError) {
        let kind: Kind
        do {
            kind = try Self.kind(of: pkey)
            try KeySanity.check(pkey, kind: kind)
        } catch {
            EVP_PKEY_free(pkey)
            throw error
        }
        self.pkey = pkey
        self.kind = kind
    }

    /// The key's type and size, for the types the engine verifies.
    private static func kind(of pkey: OpaquePointer) throws(WebAuthnError) -> Kind {
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, &length) == 1,
                let curve = ECCurve(opensslName: String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            else {
                OpenSSL.clearErrors()
                throw WebAuthnError(.algorithmUnsupported, "EC key on an unsupported curve")
            }
            return .ec(curve)
        case EVP_PKEY_RSA, EVP_PKEY_RSA_PSS:
            return .rsa(bits: Int(EVP_PKEY_get_bits(pkey)))
        case EVP_PKEY_ED25519:
            return .okp(.ed25519)
        case EVP_PKEY_ED448:
            return .okp(.ed448)
        default:
            // Provider keys (ML-DSA on OpenSSL 3.5+) have no legacy id: ask by name.
            if let set = MLDSAParameterSet.allCases.first(where: { EVP_PKEY_is_a(pkey, $0.name) == 1 }) { return .mlDSA(set) }
            throw WebAuthnError(.algorithmUnsupported, "unsupported public key type")
        }
    }

    deinit {
        cachedContext.withLockedValue { slot in
            if let slot { EVP_PKEY_CTX_free(slot.ctx) }
        }
        EVP_PKEY_free(pkey)
    }

    // MARK: Import

    /// An EC public key from its affine coordinates. A point that is not on
    /// the curve is `public_key_point_invalid`.
    package static func ec(curve: ECCurve, x: [UInt8], y: [UInt8]) throws(WebAuthnError) -> PublicKey {
        guard x.count == curve.coordinateSize, y.count == curve.coordinateSize else {
            throw WebAuthnError(.coseKeyInvalid, "\(curve.name) coordinates must be \(curve.coordinateSize) bytes; got \(x.count) and \(y.count)")
        }
        var point = [UInt8](repeating: ECCurve.uncompressedPointPrefix, count: 1)
        point += x
        point += y
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw OpenSSL.failure("EC context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        let ok = curve.opensslName.withCString { group in
            point.withUnsafeMutableBytes { pointBytes in
                var params = [
                    OSSL_PARAM_construct_utf8_string(OpenSSL.ParamName.group, UnsafeMutablePointer(mutating: group), 0),
                    OSSL_PARAM_construct_octet_string(OpenSSL.ParamName.publicKey, pointBytes.baseAddress, pointBytes.count),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_PKEY_fromdata_init(ctx) == 1 && EVP_PKEY_fromdata(ctx, &pkey, webauthn_evp_pkey_public_key_selection(), &params) == 1
            }
        }
        guard ok, let pkey else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.publicKeyPointInvalid, "the EC point is not a valid \(curve.name) public key (\(detail))")
        }
        return try PublicKey(taking: pkey)
    }

    /// An RSA public key from its modulus and exponent (big-endian). The
    /// sizes are bounded before anything reaches OpenSSL; ``KeySanity`` then
    /// checks the modulus (odd, 2048–8192 bits) and the exponent (odd, ≥ 3).
    package static func rsa(n: [UInt8], e: [UInt8]) throws(WebAuthnError) -> PublicKey {
        let modulus = n.drop { $0 == 0 }
        guard (256...1024).contains(modulus.count), let modulusLength = Int32(exactly: modulus.count) else {
            throw WebAuthnError(.publicKeyRSAInvalid, "the RSA modulus is \(modulus.count) bytes; 2048 to 8192 bits are accepted")
        }
        let exponent = e.drop { $0 == 0 }
        guard (1...8).contains(exponent.count), let exponentLength = Int32(exactly: exponent.count) else {
            throw WebAuthnError(.publicKeyRSAInvalid, "the RSA public exponent is \(exponent.count) bytes; 1 to 8 are accepted")
        }
        guard let bnN = BN_bin2bn(Array(modulus), modulusLength, nil) else { throw OpenSSL.failure("BN_bin2bn") }
        defer { BN_free(bnN) }
        guard let bnE = BN_bin2bn(Array(exponent), exponentLength, nil) else { throw OpenSSL.failure("BN_bin2bn") }
        defer { BN_free(bnE) }
        guard let builder = OSSL_PARAM_BLD_new() else { throw OpenSSL.failure("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard OSSL_PARAM_BLD_push_BN(builder, OpenSSL.ParamName.rsaN, bnN) == 1,
            OSSL_PARAM_BLD_push_BN(builder, OpenSSL.ParamName.rsaE, bnE) == 1,
            let params = OSSL_PARAM_BLD_to_param(builder)
        else { throw OpenSSL.failure("RSA parameters") }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw OpenSSL.failure("RSA context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, webauthn_evp_pkey_public_key_selection(), params) == 1, let pkey else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.coseKeyInvalid, "invalid RSA public key (\(detail))")
        }
        return try PublicKey(taking: pkey)
    }

    /// An Ed25519 or Ed448 public key from its raw encoding.
    package static func okp(curve: OKPCurve, x: [UInt8]) throws(WebAuthnError) -> PublicKey {
        guard x.count == curve.keySize else {
            throw WebAuthnError(.coseKeyInvalid, "\(curve.name) public key must be \(curve.keySize) bytes; got \(x.count)")
        }
        guard let pkey = EVP_PKEY_new_raw_public_key(curve.opensslType, nil, x, x.count) else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.coseKeyInvalid, "invalid \(curve.name) public key (\(detail))")
        }
        return try PublicKey(taking: pkey)
    }

    /// An ML-DSA public key from its raw encoding (COSE AKP `pub`). Needs an
    /// OpenSSL with ML-DSA (3.5 or newer), found at run time: on an older one
    /// the key is refused with `algorithm_unsupported`.
    package static func mlDSA(_ set: MLDSAParameterSet, publicKey raw: [UInt8]) throws(WebAuthnError) -> PublicKey {
        guard raw.count == set.publicKeySize else {
            throw WebAuthnError(.coseKeyInvalid, "\(set.name) public key must be \(set.publicKeySize) bytes; got \(raw.count)")
        }
        guard MLDSAParameterSet.available else {
            throw WebAuthnError(
                .algorithmUnsupported, "\(set.name) needs OpenSSL 3.5 or newer; this process runs \(OpenSSL.versionText), which has no ML-DSA")
        }
        guard let pkey = EVP_PKEY_new_raw_public_key_ex(nil, set.name, nil, raw, raw.count) else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.coseKeyInvalid, "invalid \(set.name) public key (\(detail))")
        }
        return try PublicKey(taking: pkey)
    }

    /// A key from DER SubjectPublicKeyInfo.
    package static func fromSubjectPublicKeyInfo(_ der: [UInt8]) throws(WebAuthnError) -> PublicKey {
        let pkey: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &p, buffer.count)
        }
        guard let pkey else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.coseKeyInvalid, "invalid SubjectPublicKeyInfo (\(detail))")
        }
        return try PublicKey(taking: pkey)
    }

    /// The DER SubjectPublicKeyInfo of the key: a canonical form for comparing keys.
    package var subjectPublicKeyInfo: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_PUBKEY(pkey, &out)
        guard n > 0, let out else { return [] }
        defer { webauthn_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }

    // MARK: Verification

    /// Whether `algorithm` is a signature scheme for this key's type.
    package func accepts(_ algorithm: COSEAlgorithm) -> Bool {
        switch (kind, algorithm) {
        case (.ec(.p256), .es256), (.ec(.p384), .es384), (.ec(.p521), .es512): return true
        case (.ec(.p256), .esp256), (.ec(.p384), .esp384), (.ec(.p521), .esp512), (.ec(.secp256k1), .es256K): return true
        case (.mlDSA(let set), _): return set.algorithm == algorithm
        case (.okp(.ed25519), .edDSA), (.okp(.ed25519), .ed25519): return true
        case (.okp(.ed448), .edDSA), (.okp(.ed448), .ed448): return true
        case (.rsa, .rs256), (.rsa, .rs384), (.rsa, .rs512), (.rsa, .ps256), (.rsa, .ps384), (.rsa, .ps512), (.rsa, .rs1):
            return true
        default: return false
        }
    }

    /// Verifies `signature` over the concatenation of `message` parts.
    /// ECDSA signatures are DER (WebAuthn L3 §6.5.5). Returns false on any
    /// verification failure, including a malformed signature.
    package func verify(signature: [UInt8], over message: [UInt8]..., algorithm: COSEAlgorithm) -> Bool {
        verify(signature: signature, parts: message, algorithm: algorithm)
    }

    package func verify(signature: [UInt8], parts: [[UInt8]], algorithm: COSEAlgorithm) -> Bool {
        guard accepts(algorithm), !signature.isEmpty, signature.count <= 8192 else { return false }
        defer { OpenSSL.clearErrors() }
        guard let digestAlgorithm = algorithm.digest else {
            return verifyOneShot(signature: signature, message: parts.count == 1 ? parts[0] : Array(parts.joined()))
        }
        let digest = Digest.hash(digestAlgorithm, parts: parts)
        guard let ctx = takeContext(for: algorithm) else { return false }
        let ok = EVP_PKEY_verify(ctx, signature, signature.count, digest, digest.count) == 1
        returnContext(ctx, for: algorithm)
        return ok
    }

    private func verifyOneShot(signature: [UInt8], message: [UInt8]) -> Bool {
        guard let mdctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(mdctx) }
        guard EVP_DigestVerifyInit_ex(mdctx, nil, nil, nil, nil, pkey, nil) == 1 else { return false }
        return EVP_DigestVerify(mdctx, signature, signature.count, message, message.count) == 1
    }

    private func takeContext(for algorithm: COSEAlgorithm) -> OpaquePointer? {
        let reused = cachedContext.withLockedValue { slot -> OpaquePointer? in
            guard let current = slot, current.alg == algorithm.rawValue else { return nil }
            slot = nil
            return current.ctx
        }
        return reused ?? makeVerifyContext(algorithm)
    }

    private func returnContext(_ ctx: OpaquePointer, for algorithm: COSEAlgorithm) {
        let keep = cachedContext.withLockedValue { slot -> Bool in
            guard slot == nil else { return false }
            slot = CachedContext(alg: algorithm.rawValue, ctx: ctx)
            return true
        }
        if !keep { EVP_PKEY_CTX_free(ctx) }
    }

    private func makeVerifyContext(_ algorithm: COSEAlgorithm) -> OpaquePointer? {
        guard let digest = algorithm.digest, let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
        var ok = EVP_PKEY_verify_init(ctx) == 1
        switch algorithm {
        case .ps256, .ps384, .ps512:
            ok =
                ok && EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, digest.md) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, RSA_PSS_SALTLEN_AUTO) == 1
        case .rs256, .rs384, .rs512, .rs1:
            ok = ok && EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1
        default:
            break
        }
        ok = ok && EVP_PKEY_CTX_set_signature_md(ctx, digest.md) == 1
        guard ok else {
            EVP_PKEY_CTX_free(ctx)
            return nil
        }
        return ctx
    }
}

/// NIST curves for EC2 keys; the raw values are COSE `crv` values (RFC 9053 §7.1).
package enum ECCurve: Int, Sendable, CaseIterable {
    case p256 = 1, p384 = 2, p521 = 3
    /// secp256k1 (COSE crv 8, RFC 8812), for ES256K.
    case secp256k1 = 8

    package var name: String {
        switch self {
        case .p256: return "P-256"
        case .p384: return "P-384"
        case .p521: return "P-521"
        case .secp256k1: return "secp256k1"
        }
    }
    package var opensslName: String {
        switch self {
        case .p256: return "prime256v1"
        case .p384: return "secp384r1"
        case .p521: return "secp521r1"
        case .secp256k1: return "secp256k1"
        }
    }
    /// Bytes of one coordinate.
    package var coordinateSize: Int {
        switch self {
        case .p256, .secp256k1: return 32
        case .p384: return 48
        case .p521: return 66
        }
    }
    /// The ECDSA algorithm of keys on this curve (WebAuthn pairs each curve with one).
    package var algorithm: COSEAlgorithm {
        switch self {
        case .p256: return .es256
        case .p384: return .es384
        case .p521: return .es512
        case .secp256k1: return .es256K
        }
    }
    /// The fully specified name of the same algorithm (RFC 9864), when it has one.
    package var fullySpecifiedAlgorithm: COSEAlgorithm? {
        switch self {
        case .p256: return .esp256
        case .p384: return .esp384
        case .p521: return .esp512
        case .secp256k1: return nil
        }
    }
    /// The curve of keys for an ECDSA algorithm (ES256, ESP256, ES256K, ...), if it is one.
    package init?(signing algorithm: COSEAlgorithm) {
        guard let curve = ECCurve.allCases.first(where: { $0.algorithm == algorithm || $0.fullySpecifiedAlgorithm == algorithm }) else { return nil }
        self = curve
    }
    /// The first byte of an uncompressed point, 0x04 ‖ x ‖ y (SEC 1 §2.3.3).
    package static let uncompressedPointPrefix: UInt8 = 0x04
    /// Bytes of an uncompressed point: the prefix and both coordinates.
    package var uncompressedPointSize: Int { 1 + 2 * coordinateSize }

    package init?(opensslName: String) {
        switch opensslName {
        case "prime256v1", "P-256", "secp256r1": self = .p256
        case "secp384r1", "P-384": self = .p384
        case "secp521r1", "P-521": self = .p521
        case "secp256k1": self = .secp256k1
        default: return nil
        }
    }
}

/// Edwards curves for OKP keys; the raw values are COSE `crv` values (RFC 9053 §7.1).
package enum OKPCurve: Int, Sendable, CaseIterable {
    case ed25519 = 6, ed448 = 7

    package var name: String { self == .ed25519 ? "Ed25519" : "Ed448" }
    package var keySize: Int { self == .ed25519 ? 32 : 57 }
    package var opensslType: Int32 { self == .ed25519 ? EVP_PKEY_ED25519 : EVP_PKEY_ED448 }
}

/// ML-DSA parameter sets (FIPS 204) for COSE AKP keys; the raw values are COSE `alg` values.
package enum MLDSAParameterSet: Int, Sendable, CaseIterable {
    case mlDSA44 = -48, mlDSA65 = -49, mlDSA87 = -50

    package var name: String {
        switch self {
        case .mlDSA44: return "ML-DSA-44"
        case .mlDSA65: return "ML-DSA-65"
        case .mlDSA87: return "ML-DSA-87"
        }
    }
    package var algorithm: COSEAlgorithm { COSEAlgorithm(rawValue) }
    /// Bytes of a public key (FIPS 204 Table 2).
    package var publicKeySize: Int {
        switch self {
        case .mlDSA44: return 1312
        case .mlDSA65: return 1952
        case .mlDSA87: return 2592
        }
    }
    /// Whether the linked OpenSSL has ML-DSA, asked once at run time (it fetches the algorithm).
    package static let available: Bool = {
        guard let fetched = EVP_SIGNATURE_fetch(nil, "ML-DSA-44", nil) else {
            OpenSSL.clearErrors()
            return false
        }
        EVP_SIGNATURE_free(fetched)
        return true
    }()
}
