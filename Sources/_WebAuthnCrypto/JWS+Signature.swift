package import _WebAuthnEncoding

extension JWS {
    /// The size of r ‖ s for each ECDSA algorithm (RFC 7518 §3.4): twice the curve's coordinate size.
    package static let ecdsaSignatureSizes: [COSEAlgorithm: Int] = [.es256: 64, .es384: 96, .es512: 132]

    /// Verifies the signature; ECDSA signatures in JWS are raw r ‖ s and are converted to DER.
    package func verifySignature(with key: PublicKey) throws(WebAuthnError) {
        var sig = signature
        if let size = Self.ecdsaSignatureSizes[algorithm] {
            guard sig.count == size else {
                throw WebAuthnError(.attestationSignatureInvalid, "the JWS \(algorithm.name) signature is \(sig.count) bytes; r ‖ s is \(size)")
            }
            sig = Self.derSignature(r: Array(sig[..<(size / 2)]), s: Array(sig[(size / 2)...]))
        }
        guard key.verify(signature: sig, parts: [signingInput], algorithm: algorithm) else {
            throw WebAuthnError(.attestationSignatureInvalid, "the JWS signature does not verify with its x5c[0] key (\(algorithm))")
        }
    }

    /// ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } from fixed-size r and s
    /// (any size: DER lengths are written in as many bytes as they need).
    package static func derSignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ v: [UInt8]) -> [UInt8] {
            var bytes = Array(v.drop { $0 == 0 })
            if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
            return [DER.Tag.integer] + DER.encodeLength(bytes.count) + bytes
        }
        let body = integer(r) + integer(s)
        return [DER.Tag.sequence] + DER.encodeLength(body.count) + body
    }
}
