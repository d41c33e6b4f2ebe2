internal import COpenSSL

#if canImport(Glibc)
    import Glibc
#endif

/// Cryptographically secure random bytes from OpenSSL's CSPRNG.
///
/// Requests of at most ``pooledLimit`` bytes (challenges, session tokens, identifiers) are served
/// from a pool that one `RAND_bytes` call fills ``poolSize`` bytes at a time. Each call to
/// `RAND_bytes` costs about a microsecond whatever its length (its method lookup takes a
/// process-wide lock, and the DRBG checks its reseed and updates its state after every call),
/// which was about 1 % of the server's CPU under load (issue 13); the pool makes that about 1/100.
///
/// - Bytes leave the pool once: they are zeroed as they are handed out.
/// - A process made by `fork` starts with an empty pool (`pthread_atfork`), so a parent and its
///   child never hand out the same bytes; the pool's lock is held across the fork, so the child
///   never finds it taken by a thread that did not come along.
/// - Larger requests (keys, test material) go to `RAND_bytes` directly.
/// - Long-lived secrets (a server's secret) come from ``secret(_:)``: OpenSSL's private generator,
///   never the pool that public values (challenges) are drawn from.
package enum SecureRandom {
    /// The largest request served from the pool.
    package static let pooledLimit = 64
    /// The pool's size: one `RAND_bytes` call fills it.
    package static let poolSize = 4096

    private final class Pool: @unchecked Sendable {
        // Guarded by `mutex`.
        var bytes = [UInt8](repeating: 0, count: SecureRandom.poolSize)
        var next = SecureRandom.poolSize
        /// How many times `RAND_bytes` filled the pool (the tests read it).
        var fills = 0
        /// A plain pthread mutex, not `NIOLock`: a child of `fork` initializes it again (its
        /// owner, the forking thread, has another thread ID there, and an error-checking mutex
        /// would refuse the unlock). Never freed: the pool lives as long as the process.
        let mutex: UnsafeMutablePointer<pthread_mutex_t> = {
            let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            precondition(pthread_mutex_init(mutex, nil) == 0)
            return mutex
        }()

        func lock() { precondition(pthread_mutex_lock(mutex) == 0) }
        func unlock() { precondition(pthread_mutex_unlock(mutex) == 0) }

        /// In a child of `fork` (the parent held the mutex across it): forgets the pool's bytes,
        /// so that the next request refills it, and makes the mutex new and free.
        func restartInChild() {
            bytes.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
            next = SecureRandom.poolSize
            precondition(pthread_mutex_init(mutex, nil) == 0)
        }
    }

    private static let pool: Pool = {
        let pool = Pool()
        // Registered once, when the pool is first used; the handlers take no captures.
        // It fails only without memory for the handler list; then no pool: forks could share it.
        precondition(
            pthread_atfork({ SecureRandom.pool.lock() }, { SecureRandom.pool.unlock() }, { SecureRandom.pool.restartInChild() }) == 0,
            "pthread_atfork failed")
        return pool
    }()

    package static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "a negative count of random bytes")
        guard count > 0 else { return [] }
        guard count <= pooledLimit else { return fresh(count, from: RAND_bytes) }
        let pool = Self.pool
        pool.lock()
        defer { pool.unlock() }
        if pool.next + count > poolSize {
            pool.bytes.withUnsafeMutableBufferPointer { fill($0, from: RAND_bytes) }
            pool.next = 0
            pool.fills += 1
        }
        let range = pool.next..<(pool.next + count)
        let out = Array(pool.bytes[range])
        pool.bytes.replaceSubrange(range, with: repeatElement(0, count: count))
        pool.next += count
        return out
    }

    /// How many times the pool has been filled in this process.
    package static var poolFills: Int {
        pool.lock()
        defer { pool.unlock() }
        return pool.fills
    }

    /// `count` bytes for a long-lived secret, from OpenSSL's private generator (`RAND_priv_bytes`),
    /// one call each: no pool, and not the generator public values come from.
    package static func secret(_ count: Int) -> [UInt8] {
        precondition(count > 0, "an empty secret")
        return fresh(count, from: RAND_priv_bytes)
    }

    /// `count` bytes from one call of `generator` (`RAND_bytes` or `RAND_priv_bytes`).
    private static func fresh(_ count: Int, from generator: (UnsafeMutablePointer<UInt8>?, Int32) -> Int32) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBufferPointer { fill($0, from: generator) }
        return out
    }

    private static func fill(_ buffer: UnsafeMutableBufferPointer<UInt8>, from generator: (UnsafeMutablePointer<UInt8>?, Int32) -> Int32) {
        guard let length = Int32(exactly: buffer.count), generator(buffer.baseAddress, length) == 1 else {
            fatalError("the CSPRNG failed: \(OpenSSL.drainErrors())")
        }
    }
}
