public import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The source of "now" for every time-dependent check of the engine:
/// challenge expiry, certificate validity and metadata freshness.
///
/// Inject ``fixed(_:)`` in tests and to verify recorded data at its recorded time.
public struct WebAuthnClock: Sendable {
    private let source: @Sendable () -> Date

    /// A clock that asks `now` for the current time.
    public init(_ now: @escaping @Sendable () -> Date) { self.source = now }

    /// The current time.
    public func now() -> Date { source() }

    /// The system's wall clock.
    public static let system = WebAuthnClock { Date() }

    /// A clock that always says `date`.
    public static func fixed(_ date: Date) -> WebAuthnClock { WebAuthnClock { date } }
}
