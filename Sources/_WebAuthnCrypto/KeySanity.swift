internal import COpenSSL
package import _WebAuthnEncoding

/// Key sanity at import: the public keys for which a valid signature proves
/// nothing are refused before any signature is checked with them.
///
/// Every ``PublicKey`` passes through ``check(_:kind:)`` once, whatever its
/// source (a COSE credential key, a TPM pubArea, a certificate's subject public
/// key). The rules, one function each:
/// - Ed25519 and Ed448: not a point of small order (the identity, whose one
///   signature verifies for every message, or another torsion point), in any
///   encoding, canonical or not.
/// - EC (P-256, P-384, P-521): OpenSSL's public key check (on the curve, not
///   the point at infinity, coordinates in range). The quick form: the full
///   `EVP_PKEY_public_check` adds n·Q = O, which holds for every point on these
///   prime-order curves (cofactor 1) and costs a scalar multiplication.
/// - RSA: the modulus is odd and 2048 to 8192 bits long, the public exponent
///   is odd and at least 3.
package enum KeySanity {
    /// RSA modulus sizes accepted, in bits.
    package static let rsaModulusBits = 2048...8192

    /// The y-coordinates of the Ed25519 points of small order, little-endian as
    /// RFC 8032 §5.1.2 encodes them: 0 (order 4), 1 (the identity), the two of
    /// the order-8 points, p − 1 (order 2), and the non-canonical p (= 0) and
    /// p + 1 (= 1). The top bit of the last byte, the sign of x, is ignored:
    /// both signs are refused.
    package static let ed25519SmallOrder: [[UInt8]] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ].map(hexBytes)

    /// The Ed448 points of small order (RFC 8032 §5.2.2 encoding, 57 bytes):
    /// y = 0 (the two points of order 4), 1 (the identity), p − 1 (order 2),
    /// and the non-canonical p (= 0) and p + 1 (= 1). The sign bit of x (the
    /// top bit of the last byte) is ignored.
    package static let ed448SmallOrder: [[UInt8]] = [
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "fefffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffffffffffffffffffffffffffffffffffffffffffffffffff00",
        "fffffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffffffffffffffffffffffffffffffffffffffffffffffffff00",
        "00000000000000000000000000000000000000000000000000000000ffffffffffffffffffffffffffffffffffffffffffffffffffffffff00",
    ].map(hexBytes)

    private static func hexBytes(_ text: String) -> [UInt8] {
        guard let bytes = Bytes.fromHex(text) else { fatalError("malformed constant \(text)") }  // constants, not input
        return bytes
    }

    /// Applies the rule for the key's type.
    package static func check(_ pkey: OpaquePointer, kind: PublicKey.Kind) throws(WebAuthnError) {
        switch kind {
        case .okp(let curve): try checkNotSmallOrder(pkey, curve: curve)
        case .ec(let curve): try checkPointValid(pkey, curve: curve)
        case .rsa: try checkRSAParameters(pkey)
        case .mlDSA: break  // fixed-size encodings, checked by length before import
        }
    }

    /// Ed25519 / Ed448: the point is not of small order, in any encoding.
    package static func checkNotSmallOrder(_ pkey: OpaquePointer, curve: OKPCurve) throws(WebAuthnError) {
        var raw = [UInt8](repeating: 0, count: curve.keySize)
        var length = raw.count
        guard EVP_PKEY_get_raw_public_key(pkey, &raw, &length) == 1, length == curve.keySize else {
            throw OpenSSL.failure("EVP_PKEY_get_raw_public_key")
        }
        if isSmallOrder(raw, curve: curve) {
            throw WebAuthnError(
                .publicKeySmallOrder,
                "the \(curve.name) public key is a point of small order (\(Bytes.hex(raw).prefix(16))…): one signature would verify for every message")
        }
    }

    /// Whether `raw` encodes a small-order point of `curve`, ignoring the sign bit of x.
    package static func isSmallOrder(_ raw: [UInt8], curve: OKPCurve) -> Bool {
        let list = curve == .ed25519 ? ed25519SmallOrder : ed448SmallOrder
        guard raw.count == curve.keySize, let last = raw.last else { return false }
        let masked = raw.dropLast() + [last & 0x7f]
        return list.contains { $0.elementsEqual(masked) }
    }

    /// EC: OpenSSL's public key check (on the curve, not at infinity,
    /// coordinates below p). `EVP_PKEY_public_check_quick`: the NIST curves have
    /// cofactor 1, so the order check of the full form cannot fail for a point
    /// that passes this one.
    package static func checkPointValid(_ pkey: OpaquePointer, curve: ECCurve) throws(WebAuthnError) {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw OpenSSL.failure("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_public_check_quick(ctx) == 1 else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.publicKeyPointInvalid, "the \(curve.name) public key is not a valid point of the curve (\(detail))")
        }
    }

    /// RSA: the modulus is odd and 2048 to 8192 bits; the public exponent is odd, at least 3 and below 2^32.
    package static func checkRSAParameters(_ pkey: OpaquePointer) throws(WebAuthnError) {
        var modulus: OpaquePointer?
        var exponent: OpaquePointer?
        defer {
            BN_free(modulus)
            BN_free(exponent)
        }
        guard EVP_PKEY_get_bn_param(pkey, OpenSSL.ParamName.rsaN, &modulus) == 1, let n = modulus,
            EVP_PKEY_get_bn_param(pkey, OpenSSL.ParamName.rsaE, &exponent) == 1, let e = exponent
        else {
            throw OpenSSL.failure("reading the RSA modulus and exponent")
        }
        let bits = Int(BN_num_bits(n))
        guard rsaModulusBits.contains(bits) else {
            throw WebAuthnError(
                .publicKeyRSAInvalid, "the RSA modulus is \(bits) bits; \(rsaModulusBits.lowerBound) to \(rsaModulusBits.upperBound) are accepted")
        }
        guard BN_is_odd(n) == 1 else {
            throw WebAuthnError(.publicKeyRSAInvalid, "the RSA modulus is even: it is not a product of two large primes")
        }
        // An odd exponent of two bits or more is at least 3.
        guard BN_is_odd(e) == 1, BN_num_bits(e) >= 2 else {
            throw WebAuthnError(
                .publicKeyRSAInvalid, "the RSA public exponent is \(BN_num_bits(e) <= 8 ? String(BN_get_word(e)) : "even"); it must be odd and at least 3")
        }
        // A huge exponent makes every verification slow (a CPU amplifier); real keys use 65537.
        guard BN_num_bits(e) <= 32 else {
            throw WebAuthnError(.publicKeyRSAInvalid, "the RSA public exponent has \(BN_num_bits(e)) bits; at most 32 are accepted (65537 is usual)")
        }
    }
}
