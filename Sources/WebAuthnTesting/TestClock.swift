public import Foundation
public import WebAuthnCore

/// A clock for tests that stands still until the test moves it.
///
/// Every check that depends on "now" (a challenge's expiry, a certificate's validity, metadata
/// freshness, an Apple token's `exp`) reads the clock it is given. Give ``clock`` to
/// `RelyingParty(…, clock:)` (or any other `clock:` parameter), then ``advance(by:)`` past a
/// lifetime to test what happens after it:
///
/// ```swift
/// let time = TestClock()
/// let rp = try RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"], clock: time.clock)
/// // ... start a ceremony, make the browser's answer ...
/// time.advance(by: rp.challengeLifetime + 1)  // finishing it now fails with challenge_expired
/// ```
///
/// Safe to read and move from any thread.
public final class TestClock: Sendable {
    private let time: Locked<Date>

    /// A clock standing at `start` (by default the system's time when it is made).
    public init(_ start: Date = Date()) { time = Locked(start) }

    /// The time the clock stands at.
    public var now: Date { time.withLock { $0 } }

    /// Moves the clock `seconds` forward (backward when negative).
    public func advance(by seconds: TimeInterval) { time.withLock { $0 = $0.addingTimeInterval(seconds) } }

    /// Sets the clock to `date`.
    public func set(_ date: Date) { time.withLock { $0 = date } }

    /// The clock as the engine takes it: each reading is ``now`` at that moment.
    public var clock: WebAuthnClock { WebAuthnClock { [self] in now } }
}
