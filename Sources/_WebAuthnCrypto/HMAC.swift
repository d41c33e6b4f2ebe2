internal import COpenSSL
internal import _WebAuthnEncoding

extension Digest {
    /// HMAC-SHA-256 of the concatenation of `parts` under `key` (OpenSSL 3's
    /// one-shot `EVP_Q_mac`). Used for server secrets: session cookies and the
    /// stand-in credentials of unknown names.
    package static func hmacSHA256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        let message = parts.flatMap { $0 }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let ok = key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_Q_mac(
                        nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count, m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count,
                        o.baseAddress, o.count, &length) != nil
                }
            }
        }
        // Cannot fail for HMAC-SHA-256 and a key in memory (keys are server configuration).
        guard ok, length == 32 else { fatalError("HMAC-SHA-256 failed: \(OpenSSL.drainErrors())") }
        return out
    }
}
