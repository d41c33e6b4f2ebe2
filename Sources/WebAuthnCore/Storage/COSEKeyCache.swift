package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Decoded credential public keys by their COSE bytes, for stores that read
/// keys from a database: a sign-in then reuses the imported OpenSSL key
/// instead of decoding and importing it again. Decoding is a pure function of
/// the bytes, so a cached key is the key the bytes would give. Bounded: when
/// `capacity` keys are held, the cache starts over.
package final class COSEKeyCache: Sendable {
    package let capacity: Int
    private let keys = Locked<[[UInt8]: COSEKey]>([:])

    package init(capacity: Int = 10_000) { self.capacity = max(1, capacity) }

    /// The key for `bytes`; bytes that are not a valid key throw, as `COSEKey(bytes:)` does, and are not kept.
    package func key(_ bytes: [UInt8]) throws(WebAuthnError) -> COSEKey {
        if let known = keys.withLock({ $0[bytes] }) { return known }
        let key = try COSEKey(bytes: bytes)
        keys.withLock { cache in
            if cache.count >= capacity { cache.removeAll(keepingCapacity: true) }
            cache[bytes] = key
        }
        return key
    }

    /// How many keys are held.
    package var count: Int { keys.withLock { $0.count } }
}
