internal import COpenSSL
package import _WebAuthnEncoding

/// Authenticated encryption of small secrets kept at rest (a Sign in with Apple
/// refresh token in the accounts database): AES-256-GCM through OpenSSL's EVP,
/// a random 96-bit nonce per message, and `associated` data bound into the tag
/// (for example the identity the token belongs to, so a sealed value cannot be
/// moved to another row). Layout: version byte 1 ‖ nonce (12) ‖ ciphertext ‖ tag (16).
package enum Seal {
    static let version: UInt8 = 1
    static let nonceSize = 12, tagSize = 16
    /// The largest plaintext sealed (refresh tokens are a few hundred bytes).
    package static let maxPlaintext = 16 * 1024

    /// Seals `plaintext` under a 32-byte `key`.
    package static func seal(_ plaintext: [UInt8], key: [UInt8], associated: [UInt8] = []) throws(WebAuthnError) -> [UInt8] {
        guard key.count == 32, plaintext.count <= maxPlaintext else {
            throw WebAuthnError(.cryptoFailure, "AES-256-GCM takes a 32-byte key and at most \(maxPlaintext) bytes")
        }
        let nonce = SecureRandom.bytes(nonceSize)
        var out = [UInt8](repeating: 0, count: plaintext.count)
        var tag = [UInt8](repeating: 0, count: tagSize)
        try run(encrypt: true, key: key, nonce: nonce, associated: associated, input: plaintext, output: &out, tag: &tag)
        return [version] + nonce + out + tag
    }

    /// Opens what ``seal(_:key:associated:)`` made with the same key and associated
    /// data; anything else (another key, edited bytes, another row) is `crypto_failure`.
    package static func open(_ sealed: [UInt8], key: [UInt8], associated: [UInt8] = []) throws(WebAuthnError) -> [UInt8] {
        guard key.count == 32, sealed.count >= 1 + nonceSize + tagSize, sealed.count <= 1 + nonceSize + maxPlaintext + tagSize,
            sealed[0] == version
        else {
            throw WebAuthnError(.cryptoFailure, "not a sealed value of this server")
        }
        let nonce = Array(sealed[1...nonceSize])
        let body = Array(sealed[(1 + nonceSize)..<(sealed.count - tagSize)])
        var tag = Array(sealed[(sealed.count - tagSize)...])
        var out = [UInt8](repeating: 0, count: body.count)
        try run(encrypt: false, key: key, nonce: nonce, associated: associated, input: body, output: &out, tag: &tag)
        return out
    }

    private static func run(
        encrypt: Bool, key: [UInt8], nonce: [UInt8], associated: [UInt8], input: [UInt8],
        output: inout [UInt8], tag: inout [UInt8]
    ) throws(WebAuthnError) {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard let inputLength = Int32(exactly: input.count), let associatedLength = Int32(exactly: associated.count),
            let nonceLength = Int32(exactly: nonce.count), let tagLength = Int32(exactly: tag.count)
        else {
            throw WebAuthnError(.cryptoFailure, "AES-256-GCM input too large")
        }
        let cipher = EVP_aes_256_gcm()
        var written: Int32 = 0
        let ok: Bool =
            encrypt
            ? EVP_EncryptInit_ex(ctx, cipher, nil, nil, nil) == 1
            : EVP_DecryptInit_ex(ctx, cipher, nil, nil, nil) == 1
        guard ok, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, nonceLength, nil) == 1 else { throw OpenSSL.failure("AES-256-GCM init") }
        let keyed: Bool =
            encrypt
            ? EVP_EncryptInit_ex(ctx, nil, nil, key, nonce) == 1
            : EVP_DecryptInit_ex(ctx, nil, nil, key, nonce) == 1
        guard keyed else { throw OpenSSL.failure("AES-256-GCM key") }
        if !associated.isEmpty {
            let fed: Bool =
                encrypt
                ? EVP_EncryptUpdate(ctx, nil, &written, associated, associatedLength) == 1
                : EVP_DecryptUpdate(ctx, nil, &written, associated, associatedLength) == 1
            guard fed else { throw OpenSSL.failure("AES-256-GCM associated data") }
        }
        if !input.isEmpty {
            let done: Bool = output.withUnsafeMutableBufferPointer { o in
                encrypt
                    ? EVP_EncryptUpdate(ctx, o.baseAddress, &written, input, inputLength) == 1
                    : EVP_DecryptUpdate(ctx, o.baseAddress, &written, input, inputLength) == 1
            }
            guard done, written == inputLength else { throw OpenSSL.failure("AES-256-GCM update") }
        }
        var final: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        if encrypt {
            guard EVP_EncryptFinal_ex(ctx, &scratch, &final) == 1, final == 0,
                EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, tagLength, &tag) == 1
            else { throw OpenSSL.failure("AES-256-GCM final") }
        } else {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, tagLength, &tag) == 1 else { throw OpenSSL.failure("AES-256-GCM tag") }
            guard EVP_DecryptFinal_ex(ctx, &scratch, &final) == 1, final == 0 else {
                _ = OpenSSL.drainErrors()
                throw WebAuthnError(.cryptoFailure, "the sealed value does not open with this key (edited, or sealed for another record or server)")
            }
        }
    }
}
