import COpenSSL

/// The floor the benchmark compares against: raw OpenSSL verification of one
/// signature with a ready key, as a caller using `EVP_DigestVerify` directly
/// would write it. SPI for `webauthn bench` only.
@_spi(Benchmark)
public final class RawVerifier: @unchecked Sendable {
    private let key: SigningKeyReference
    private let message: [UInt8]
    private let signature: [UInt8]

    private let digestName: String?

    /// A fresh key for `algorithm` (ES256, EdDSA or RS256) and one signature
    /// over a 69-byte message (the size of authenticatorData ‖ clientDataHash).
    public init(_ algorithm: COSEAlgorithm) throws(WebAuthnError) {
        let signer = try SigningKey.generate(algorithm)
        digestName = algorithm.digest == nil ? nil : "SHA256"
        message = SecureRandom.bytes(69)
        signature = try signer.sign(message)
        key = SigningKeyReference(signer)
    }

    /// One verification; returns whether it succeeded.
    @inline(never)
    public func verifyOnce() -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit_ex(ctx, nil, digestName, nil, nil, key.signer.pkey, nil) == 1 else { return false }
        return EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
    }
}

/// Holds the signer so its key pair outlives the verifier.
struct SigningKeyReference: @unchecked Sendable {
    let signer: SigningKey
    init(_ signer: SigningKey) { self.signer = signer }
}
