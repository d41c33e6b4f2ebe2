internal import COpenSSL
internal import _WebAuthnEncoding

extension Digest {
    /// HMAC-SHA-256 of the concatenation of `parts` under `key`, keyed for this one call.
    /// Where one key signs many messages (session cookies, stand-in credentials), keep an
    /// ``HMACKey`` instead: keying costs more than the MAC of a short message.
    package static func hmacSHA256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        HMACKey(key).authenticate(parts: parts)
    }
}

/// HMAC-SHA-256 under one key, keyed once (OpenSSL's `EVP_MAC`). Each MAC works on a
/// duplicate of the keyed context (`EVP_MAC_CTX_dup`), which fetches nothing and hashes
/// no key pads: `EVP_Q_mac` fetched the MAC and the digest by name on every call, 2 % of the
/// server's CPU per sign-in (issue 13). The keyed context is never changed after `init`, so
/// one key serves any number of threads at once.
package final class HMACKey: @unchecked Sendable {
    /// The `EVP_MAC_CTX` with the key set; only read (duplicated) after `init`.
    private let keyed: OpaquePointer

    package init(_ key: [UInt8]) {
        guard let ctx = EVP_MAC_CTX_new(OpenSSL.hmac) else { fatalError("out of memory") }
        var params = [
            OSSL_PARAM_construct_utf8_string(OpenSSL.ParamName.digest, UnsafeMutablePointer(mutating: OpenSSL.ParamName.sha256), 0),
            OSSL_PARAM_construct_end(),
        ]
        // A key of no bytes is still a key: a pointer to nothing, never NULL (NULL means "keep the old key").
        let ok = (key.isEmpty ? [0] : key).withUnsafeBufferPointer { EVP_MAC_init(ctx, $0.baseAddress, key.count, &params) } == 1
        // Cannot fail for HMAC-SHA-256 and a key in memory (keys are server configuration).
        guard ok else {
            EVP_MAC_CTX_free(ctx)
            fatalError("HMAC-SHA-256 keying failed: \(OpenSSL.drainErrors())")
        }
        keyed = ctx
    }

    deinit { EVP_MAC_CTX_free(keyed) }

    /// HMAC-SHA-256 of the concatenation of `parts`.
    package func authenticate(_ parts: [UInt8]...) -> [UInt8] { authenticate(parts: parts) }

    /// HMAC-SHA-256 of the concatenation of `parts`.
    package func authenticate(parts: [[UInt8]]) -> [UInt8] {
        guard let ctx = EVP_MAC_CTX_dup(keyed) else { fatalError("out of memory") }
        defer { EVP_MAC_CTX_free(ctx) }
        var ok = true
        for part in parts where ok && !part.isEmpty {
            ok = part.withUnsafeBufferPointer { EVP_MAC_update(ctx, $0.baseAddress, $0.count) } == 1
        }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        if ok { ok = out.withUnsafeMutableBufferPointer { EVP_MAC_final(ctx, $0.baseAddress, &length, $0.count) } == 1 }
        guard ok, length == 32 else { fatalError("HMAC-SHA-256 failed: \(OpenSSL.drainErrors())") }
        return out
    }
}
