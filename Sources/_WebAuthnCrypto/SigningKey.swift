internal import COpenSSL
package import _WebAuthnEncoding

/// A private key that signs like an authenticator does. Relying parties never
/// need one; it exists for the software authenticator (`WebAuthnTesting`),
/// the benchmark and the demo, and is exposed as SPI only.
package final class SigningKey: @unchecked Sendable {
    /// Owned `EVP_PKEY *` holding a key pair.
    package let pkey: OpaquePointer
    package let algorithm: COSEAlgorithm

    package init(taking pkey: OpaquePointer, algorithm: COSEAlgorithm) {
        self.pkey = pkey
        self.algorithm = algorithm
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Generates a key for `algorithm`: P-256/384/521 for ES*, Ed25519 for
    /// EdDSA, Ed448 for Ed448, RSA-2048 for RS*/PS*.
    package static func generate(_ algorithm: COSEAlgorithm) throws(WebAuthnError) -> SigningKey {
        let type: String
        var group: String?
        switch algorithm {
        case .es256, .esp256: type = "EC"; group = "P-256"
        case .es384, .esp384: type = "EC"; group = "P-384"
        case .es512, .esp512: type = "EC"; group = "P-521"
        case .es256K: type = "EC"; group = "secp256k1"
        case .edDSA, .ed25519: type = "ED25519"
        case .ed448: type = "ED448"
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .rs1: type = "RSA"
        default: throw WebAuthnError(.algorithmUnsupported, "cannot generate a key for \(algorithm)")
        }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw OpenSSL.failure("keygen context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var ok = EVP_PKEY_keygen_init(ctx) == 1
        if let group { ok = ok && EVP_PKEY_CTX_set_group_name(ctx, group) == 1 }
        if type == "RSA" { ok = ok && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1 }
        var pkey: OpaquePointer?
        ok = ok && EVP_PKEY_generate(ctx, &pkey) == 1
        guard ok, let pkey else { throw OpenSSL.failure("key generation") }
        return SigningKey(taking: pkey, algorithm: algorithm)
    }

    /// Loads a PEM private key (PKCS#8 or traditional) to sign with `algorithm`.
    package convenience init(pem: String, algorithm: COSEAlgorithm) throws(WebAuthnError) {
        let bytes = Array(pem.utf8)
        let pkey: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let pkey else { throw OpenSSL.failure("reading the PEM private key") }
        self.init(taking: pkey, algorithm: algorithm)
    }

    /// The private key as PKCS#8 PEM.
    package func privateKeyPEM() throws(WebAuthnError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw OpenSSL.failure("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) == 1 else { throw OpenSSL.failure("PEM_write_bio_PrivateKey") }
        var pointer: UnsafeMutablePointer<CChar>?
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &pointer)
        guard length > 0, let pointer else { throw OpenSSL.failure("reading the PEM") }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self)
    }

    /// Signs the concatenation of `parts` (ECDSA signatures are DER).
    package func sign(_ parts: [UInt8]...) throws(WebAuthnError) -> [UInt8] {
        let message = Array(parts.joined())
        guard let mdctx = EVP_MD_CTX_new() else { throw OpenSSL.failure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(mdctx) }
        var pctx: OpaquePointer?
        var ok = EVP_DigestSignInit_ex(mdctx, &pctx, algorithm.digest.map { Self.digestName($0) }, nil, nil, pkey, nil) == 1
        switch algorithm {
        case .ps256, .ps384, .ps512:
            ok =
                ok && EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1
        default: break
        }
        var length = 0
        ok = ok && EVP_DigestSign(mdctx, nil, &length, message, message.count) == 1
        var signature = [UInt8](repeating: 0, count: length)
        ok = ok && EVP_DigestSign(mdctx, &signature, &length, message, message.count) == 1
        guard ok else { throw OpenSSL.failure("signing") }
        return Array(signature.prefix(length))
    }

    private static func digestName(_ d: DigestAlgorithm) -> String {
        switch d {
        case .sha1: return "SHA1"
        case .sha256: return "SHA256"
        case .sha384: return "SHA384"
        case .sha512: return "SHA512"
        }
    }

    /// The public key as a COSE_Key map.
    package func coseKey() throws(WebAuthnError) -> CBOR {
        let alg = CBORPair(CBOR(COSE.Label.alg), CBOR(algorithm.rawValue))
        switch algorithm {
        case .es256, .es384, .es512, .esp256, .esp384, .esp512, .es256K:
            var buffer = [UInt8](repeating: 0, count: 200)
            var length = 0
            guard EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, &buffer, buffer.count, &length) == 1 else {
                throw OpenSSL.failure("reading the EC public key")
            }
            guard let curve = ECCurve(signing: algorithm) else { throw WebAuthnError(.algorithmUnsupported, "no curve for \(algorithm)") }
            let n = curve.coordinateSize
            guard length == curve.uncompressedPointSize, buffer[0] == ECCurve.uncompressedPointPrefix else {
                throw WebAuthnError(.cryptoFailure, "unexpected EC point encoding")
            }
            return .map([
                CBORPair(CBOR(COSE.Label.kty), CBOR(COSE.KeyType.ec2)), alg, CBORPair(CBOR(COSE.Label.crv), CBOR(curve.rawValue)),
                CBORPair(CBOR(COSE.Label.x), .bytes(Array(buffer[1...n]))), CBORPair(CBOR(COSE.Label.y), .bytes(Array(buffer[(n + 1)...(2 * n)]))),
            ])
        case .edDSA, .ed25519, .ed448:
            var buffer = [UInt8](repeating: 0, count: 64)
            var length = buffer.count
            guard EVP_PKEY_get_raw_public_key(pkey, &buffer, &length) == 1 else { throw OpenSSL.failure("reading the EdDSA public key") }
            let curve: OKPCurve = length == OKPCurve.ed25519.keySize ? .ed25519 : .ed448
            return .map([
                CBORPair(CBOR(COSE.Label.kty), CBOR(COSE.KeyType.okp)), alg, CBORPair(CBOR(COSE.Label.crv), CBOR(curve.rawValue)),
                CBORPair(CBOR(COSE.Label.x), .bytes(Array(buffer.prefix(length)))),
            ])
        default:
            return .map([
                CBORPair(CBOR(COSE.Label.kty), CBOR(COSE.KeyType.rsa)), alg, CBORPair(CBOR(COSE.Label.n), .bytes(try bignum(OSSL_PKEY_PARAM_RSA_N))),
                CBORPair(CBOR(COSE.Label.e), .bytes(try bignum(OSSL_PKEY_PARAM_RSA_E))),
            ])
        }
    }

    private func bignum(_ name: String) throws(WebAuthnError) -> [UInt8] {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else { throw OpenSSL.failure("reading \(name)") }
        defer { BN_free(bn) }
        var out = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
        BN_bn2bin(bn, &out)
        return out
    }
}
