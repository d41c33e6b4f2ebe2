internal import NIOConcurrencyHelpers

/// A value behind a lock, with `Synchronization.Mutex`'s `withLock` (typed throws), over
/// NIO's pthread lock. Not `Mutex`: on Linux that is a futex ThreadSanitizer cannot see, so
/// the concurrency tests under TSan reported false races on every value it guarded.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NIOLock()
    private var value: Value

    /// A lock around `value`.
    package init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
