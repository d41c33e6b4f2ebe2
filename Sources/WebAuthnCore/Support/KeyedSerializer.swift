/// Runs async work one at a time per key (other keys run freely): a waiting caller suspends,
/// it never blocks a thread. Used where a check and the write that depends on it must not
/// interleave with another caller's for the same key inside this process (the credential limit:
/// count, then store).
package final class KeyedSerializer<Key: Hashable & Sendable>: Sendable {
    /// A key present is held; its value is the callers waiting for it, first come first served.
    private let holders = Locked([Key: [CheckedContinuation<Void, Never>]]())

    package init() {}

    /// Runs `body` once no other `run` for `key` is running.
    package func run<T: Sendable>(_ key: Key, _ body: () async throws(WebAuthnError) -> T) async throws(WebAuthnError) -> T {
        await acquire(key)
        defer { release(key) }
        return try await body()
    }

    private func acquire(_ key: Key) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let mine = holders.withLock { held -> Bool in
                guard held[key] != nil else {
                    held[key] = []
                    return true
                }
                held[key]!.append(continuation)
                return false
            }
            if mine { continuation.resume() }
        }
    }

    /// Hands the key to the first waiter, or frees it.
    private func release(_ key: Key) {
        let next = holders.withLock { held -> CheckedContinuation<Void, Never>? in
            guard var waiting = held[key], !waiting.isEmpty else {
                held[key] = nil
                return nil
            }
            let first = waiting.removeFirst()
            held[key] = waiting
            return first
        }
        next?.resume()
    }

    /// How many keys are held (for the tests: none once every run has returned).
    package var heldCount: Int { holders.withLock { $0.count } }
}
