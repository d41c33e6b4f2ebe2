internal import COpenSSL
package import _WebAuthnEncoding

/// The floor the benchmark compares against: raw OpenSSL verification of one
/// signature with a ready key, as a caller using `EVP_DigestVerify` directly
/// would write it. SPI for `webauthn bench` only.
package final class RawVerifier: @unchecked Sendable {
    private let key: SigningKeyReference
    private let message: [UInt8]
    private let signature: [UInt8]

    private let digestName: String?

    /// A fresh key for `algorithm` (ES256, EdDSA or RS256) and one signature
    /// over a 69-byte message (the size of authenticatorData ‖ clientDataHash).
    package init(_ algorithm: COSEAlgorithm) throws(WebAuthnError) {
        let signer = try SigningKey.generate(algorithm)
        digestName = algorithm.digest == nil ? nil : "SHA256"
        message = SecureRandom.bytes(69)
        signature = try signer.sign(message)
        key = SigningKeyReference(signer)
    }

    /// One verification; returns whether it succeeded.
    @inline(never)
    package func verifyOnce() -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit_ex(ctx, nil, digestName, nil, nil, key.signer.pkey, nil) == 1 else { return false }
        return EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
    }
}

/// Holds the signer so its key pair outlives the verifier.
package struct SigningKeyReference: @unchecked Sendable {
    package let signer: SigningKey
    package init(_ signer: SigningKey) { self.signer = signer }
}

/// What `openssl speed` measures, reproduced in-process: `EVP_PKEY_verify`
/// on a context prepared once, over a precomputed digest. The strictest
/// floor: it does no hashing and no per-call set-up. SPI for `webauthn bench`.
package final class PreparedVerifier: @unchecked Sendable {
    private let key: SigningKeyReference
    /// `EVP_PKEY_CTX *` (ECDSA, RSA) or, for EdDSA, nil and `mdctx` is used.
    private let ctx: OpaquePointer?
    /// `EVP_MD_CTX *` for EdDSA, which has no pre-hashed verify.
    private let mdctx: OpaquePointer?
    private let message: [UInt8]
    private let digest: [UInt8]
    private let signature: [UInt8]

    package init(_ algorithm: COSEAlgorithm) throws(WebAuthnError) {
        let signer = try SigningKey.generate(algorithm)
        message = SecureRandom.bytes(69)
        signature = try signer.sign(message)
        digest = Digest.sha256(message)
        key = SigningKeyReference(signer)
        if algorithm.digest == nil {
            guard let md = EVP_MD_CTX_new(), EVP_DigestVerifyInit_ex(md, nil, nil, nil, nil, signer.pkey, nil) == 1 else {
                throw OpenSSL.failure("EVP_DigestVerifyInit_ex")
            }
            mdctx = md
            ctx = nil
            return
        }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, signer.pkey, nil), EVP_PKEY_verify_init(ctx) == 1 else {
            throw OpenSSL.failure("EVP_PKEY_verify_init")
        }
        if algorithm == .rs256 { EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) }
        EVP_PKEY_CTX_set_signature_md(ctx, OpenSSL.sha256)
        self.ctx = ctx
        mdctx = nil
    }

    deinit {
        if let ctx { EVP_PKEY_CTX_free(ctx) }
        if let mdctx { EVP_MD_CTX_free(mdctx) }
    }

    @inline(never)
    package func verifyOnce() -> Bool {
        if let mdctx { return EVP_DigestVerify(mdctx, signature, signature.count, message, message.count) == 1 }
        return EVP_PKEY_verify(ctx, signature, signature.count, digest, digest.count) == 1
    }
}
