import Foundation
import Synchronization

/// A byte-string dictionary key hashed in one call (`[UInt8]` hashes byte by byte).
struct ByteKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
}

/// A thread-safe in-memory ``CredentialStore`` for tests, demos and single
/// process deployments that keep nothing across restarts. Records keep their
/// imported public keys, so verification never re-imports a key.
public final class InMemoryCredentialStore: CredentialStore {
    private let state = Mutex<[ByteKey: CredentialRecord]>([:])

    public init() {}

    public func credential(id: [UInt8]) async throws -> CredentialRecord? { lookup(id: id) }

    /// Synchronous lookup (the store never suspends).
    public func lookup(id: [UInt8]) -> CredentialRecord? { state.withLock { $0[ByteKey(id)] } }

    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        state.withLock { records in
            records.values.filter { $0.userHandle == userHandle }.sorted { $0.createdAt < $1.createdAt }
        }
    }

    public func insert(_ record: CredentialRecord) async throws {
        try state.withLock { (records) throws(WebAuthnError) in
            guard records[ByteKey(record.id)] == nil else {
                throw WebAuthnError(.credentialAlreadyRegistered, "credential \(Base64URL.encode(record.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
            }
            records[ByteKey(record.id)] = record
        }
    }

    public func update(_ record: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        state.withLock { records in
            let key = ByteKey(record.id)
            guard let current = records[key], current.signCount == expectedSignCount else { return false }
            records[key] = record
            return true
        }
    }

    public func delete(id: [UInt8]) async throws -> Bool {
        state.withLock { $0.removeValue(forKey: ByteKey(id)) != nil }
    }

    /// The number of stored credentials.
    public var count: Int { state.withLock { $0.count } }
}

/// A thread-safe in-memory ``ChallengeStore``. Expired entries are swept
/// when new ones are inserted, so memory stays bounded by the issue rate.
public final class InMemoryChallengeStore: ChallengeStore {
    private let state = Mutex<[ByteKey: PendingCeremony]>([:])
    private let clock: WebAuthnClock
    /// The most pending ceremonies kept at once; beyond it the oldest are dropped.
    public let capacity: Int

    public init(clock: WebAuthnClock = .system, capacity: Int = 100_000) {
        self.clock = clock
        self.capacity = capacity
    }

    public func insert(_ ceremony: PendingCeremony) async throws {
        let now = clock.now()
        state.withLock { pending in
            if pending.count >= capacity {
                pending = pending.filter { $0.value.expiresAt > now }
                while pending.count >= capacity, let oldest = pending.min(by: { $0.value.expiresAt < $1.value.expiresAt }) {
                    pending.removeValue(forKey: oldest.key)
                }
            }
            pending[ByteKey(ceremony.challenge)] = ceremony
        }
    }

    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        state.withLock { $0[ByteKey(challenge)] }
    }

    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        state.withLock { $0.removeValue(forKey: ByteKey(challenge)) }
    }

    /// The number of pending ceremonies.
    public var count: Int { state.withLock { $0.count } }
}
