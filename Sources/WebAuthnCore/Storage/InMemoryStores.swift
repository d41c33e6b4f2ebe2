public import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// A byte-string dictionary key hashed in one call (`[UInt8]` hashes byte by byte).
struct ByteKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
}

/// A thread-safe in-memory ``CredentialStore`` for tests, demos and single
/// process deployments that keep nothing across restarts. Records keep their
/// imported public keys, so verification never re-imports a key.
public final class InMemoryCredentialStore: CredentialStore, CredentialAuditing {
    private let state = Locked<[ByteKey: CredentialRecord]>([:])

    /// An empty store.
    public init() {}

    /// The record with this credential ID, if any.
    public func credential(id: [UInt8]) async throws -> CredentialRecord? { lookup(id: id) }

    /// Synchronous lookup (the store never suspends).
    public func lookup(id: [UInt8]) -> CredentialRecord? { state.withLock { $0[ByteKey(id)] } }

    /// The user's credentials, oldest first.
    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        state.withLock { records in
            records.values.filter { $0.userHandle == userHandle }.sorted { $0.createdAt < $1.createdAt }
        }
    }

    /// Stores a new record; throws `credential_already_registered` when the ID exists.
    public func insert(_ record: CredentialRecord) async throws { try insertNow(record) }

    func insertNow(_ record: CredentialRecord) throws(WebAuthnError) {
        try state.withLock { (records) throws(WebAuthnError) in
            guard records[ByteKey(record.id)] == nil else {
                throw WebAuthnError(
                    .credentialAlreadyRegistered, "credential \(Base64URL.encode(record.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27"
                )
            }
            records[ByteKey(record.id)] = record
        }
    }

    /// Replaces the record if the stored counter still equals `expectedSignCount`
    /// (compare-and-set); returns whether it did.
    public func update(_ record: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        state.withLock { records in
            let key = ByteKey(record.id)
            guard let current = records[key], current.signCount == expectedSignCount else { return false }
            records[key] = record
            return true
        }
    }

    /// Removes a credential; returns whether it existed.
    public func delete(id: [UInt8]) async throws -> Bool {
        state.withLock { $0.removeValue(forKey: ByteKey(id)) != nil }
    }

    /// Sets or clears the owner's name of a credential of `userHandle`; returns whether it did.
    public func rename(id: [UInt8], ofUser userHandle: [UInt8], to name: String?) async throws -> Bool {
        state.withLock { records in
            let key = ByteKey(id)
            guard var record = records[key], record.userHandle == userHandle else { return false }
            record.name = name
            records[key] = record
            return true
        }
    }

    /// Up to `limit` credentials whose IDs sort after `cursor`, in byte order.
    public func credentials(after cursor: [UInt8]?, limit: Int) async throws -> [CredentialRecord] {
        state.withLock { records in
            let sorted = records.values.filter { cursor == nil || cursor!.lexicographicallyPrecedes($0.id) }
                .sorted { $0.id.lexicographicallyPrecedes($1.id) }
            return Array(sorted.prefix(max(0, limit)))
        }
    }

    /// Sets or clears the flag of credential `id`; returns whether it exists.
    public func setFlag(_ flag: CredentialFlag?, id: [UInt8]) async throws -> Bool {
        state.withLock { records in
            guard var record = records[ByteKey(id)] else { return false }
            record.flag = flag
            records[ByteKey(id)] = record
            return true
        }
    }

    func deleteAll(userHandle: [UInt8]) {
        state.withLock { records in records = records.filter { $0.value.userHandle != userHandle } }
    }

    /// The number of stored credentials.
    public var count: Int { state.withLock { $0.count } }
}

/// A thread-safe in-memory ``ChallengeStore``. Every operation is O(1)
/// amortised: the oldest ceremonies are found through an insertion-order
/// queue, never by scanning, so a full store costs a flood nothing extra.
public final class InMemoryChallengeStore: ChallengeStore {
    private struct State {
        var pending: [ByteKey: PendingCeremony] = [:]
        /// The keys of Apple notifications handled (``PendingCeremony/Kind/appleNotification``),
        /// kept apart: never dropped to make room, only swept when they expire. Dropped with the
        /// oldest, a flood made room by dropping them first, and a captured notification replayed
        /// after it acted again (the SQLite and PostgreSQL stores drop the ones that expire first,
        /// so these, kept a day, go last).
        var notifications: [ByteKey: PendingCeremony] = [:]
        var order = FIFO<ByteKey>()
        var perBinding: [ByteKey: FIFO<ByteKey>] = [:]

        /// Drops consumed entries from the insertion-order queue (amortised O(1)).
        mutating func compactOrder() {
            var queue = FIFO<ByteKey>()
            swap(&queue, &order)
            queue.compact(liveCount: pending.count) { pending[$0] != nil }
            swap(&queue, &order)
        }

        /// Drops a binding's consumed entries, and the binding once it has none.
        mutating func forget(binding: [UInt8]) {
            let b = ByteKey(binding)
            guard var queue = perBinding[b] else { return }
            queue.compact(liveCount: 0) { pending[$0] != nil }
            perBinding[b] = queue.count == 0 ? nil : queue
        }
    }
    private let state = Locked(State())
    private let clock: WebAuthnClock
    /// The most pending ceremonies kept at once; beyond it the oldest are dropped.
    public let capacity: Int

    /// An empty store.
    ///
    /// - Parameters:
    ///   - clock: The store's clock. The store judges no expiry itself: callers
    ///     do, and ``sweep(expiredBefore:)`` removes expired ceremonies.
    ///   - capacity: The most pending ceremonies kept (at least 1); beyond it the
    ///     oldest are dropped. Default 100,000.
    public init(clock: WebAuthnClock = .system, capacity: Int = 100_000) {
        self.clock = clock
        self.capacity = max(1, capacity)
    }

    /// Keeps a ceremony under its challenge, dropping the oldest of its binding
    /// beyond ``PendingCeremony/maxPerBinding`` and the oldest overall beyond ``capacity``.
    public func insert(_ ceremony: PendingCeremony) async throws {
        let key = ByteKey(ceremony.challenge)
        if ceremony.kind == .appleNotification && ceremony.binding == nil {
            state.withLock { $0.notifications[key] = ceremony }
            return
        }
        state.withLock { s in
            if s.pending.updateValue(ceremony, forKey: key) == nil { s.order.append(key) }
            if let binding = ceremony.binding {
                // A binding keeps its newest `maxPerBinding` ceremonies.
                let b = ByteKey(binding)
                var queue = s.perBinding[b, default: FIFO()]
                queue.append(key)
                queue.compact(liveCount: 0) { s.pending[$0] != nil }
                while queue.count > PendingCeremony.maxPerBinding, let old = queue.popFirst() { s.pending.removeValue(forKey: old) }
                s.perBinding[b] = queue
            }
            while s.pending.count > capacity, let old = s.order.popFirst() { s.pending.removeValue(forKey: old) }
            s.compactOrder()
        }
    }

    /// The ceremony under `challenge`, without removing it.
    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        state.withLock { $0.pending[ByteKey(challenge)] ?? $0.notifications[ByteKey(challenge)] }
    }

    /// Removes and returns the ceremony under `challenge`, atomically: of two
    /// concurrent consumers exactly one gets it.
    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        state.withLock { s in
            if let kept = s.notifications.removeValue(forKey: ByteKey(challenge)) { return kept }
            guard let ceremony = s.pending.removeValue(forKey: ByteKey(challenge)) else { return nil }
            if let binding = ceremony.binding { s.forget(binding: binding) }
            return ceremony
        }
    }

    /// A full pass over the pending ceremonies: the engine calls it once per
    /// sweep interval, not per request.
    public func sweep(expiredBefore date: Date) async throws -> Int {
        state.withLock { s in
            let expired = s.pending.filter { $0.value.expiresAt < date }
            for (key, c) in expired {
                s.pending.removeValue(forKey: key)
                if let binding = c.binding { s.forget(binding: binding) }
            }
            s.notifications = s.notifications.filter { $0.value.expiresAt >= date }
            s.compactOrder()
            return s.pending.count + s.notifications.count
        }
    }

    /// Removes up to `count` of the oldest ceremonies (in insertion order, which is expiry
    /// order for one engine); returns how many it removed.
    public func evictOldest(_ count: Int) async throws -> Int {
        state.withLock { s in
            var removed = 0
            while removed < count, let old = s.order.popFirst() {
                guard let ceremony = s.pending.removeValue(forKey: old) else { continue }
                if let binding = ceremony.binding { s.forget(binding: binding) }
                removed += 1
            }
            s.compactOrder()
            return removed
        }
    }

    /// The number of pending ceremonies (the kept notification keys included).
    public var count: Int { state.withLock { $0.pending.count + $0.notifications.count } }

    /// The length of the insertion-order queue, live and dead entries (for tests).
    var queueLength: Int { state.withLock { $0.order.count } }
}

/// A first-in first-out queue with O(1) amortised append and pop, and a
/// compaction that drops dead entries once they are half of it.
struct FIFO<Element>: Sendable where Element: Sendable & Hashable {
    private var items: [Element] = []
    private var head = 0

    var count: Int { items.count - head }
    var first: Element? { head < items.count ? items[head] : nil }

    mutating func append(_ e: Element) { items.append(e) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let e = items[head]
        head += 1
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return e
    }

    /// Drops dead entries once they outnumber `liveCount` (plus a little), so
    /// that the cost is amortised O(1) per append; `liveCount` 0 always filters
    /// (for short queues).
    /// A key inserted again (a challenge given back after a lost race) is
    /// kept once, so the queue never grows beyond twice the live entries.
    mutating func compact(liveCount: Int, isLive: (Element) -> Bool) {
        guard liveCount == 0 || count > 2 * liveCount + 64 else { return }
        var seen = Set<Element>(minimumCapacity: liveCount)
        items = items[head...].filter { isLive($0) && seen.insert($0).inserted }
        head = 0
    }
}

/// A thread-safe in-memory ``SessionStore`` with O(1) operations: at its
/// capacity the oldest session is dropped through an insertion-order queue.
public final class InMemorySessionStore: SessionStore {
    private struct State {
        var sessions: [ByteKey: SignedInSession] = [:]
        var order = FIFO<ByteKey>()
        var perUser: [ByteKey: FIFO<ByteKey>] = [:]
    }
    private let state = Locked(State())
    /// The most sessions kept at once.
    public let capacity: Int

    /// An empty store keeping at most `capacity` sessions (at least 1). Default 100,000.
    public init(capacity: Int = 100_000) { self.capacity = max(1, capacity) }

    /// Stores a session, dropping the account's oldest beyond
    /// ``SignedInSession/maxPerUser`` and the oldest overall beyond ``capacity``.
    public func insert(_ session: SignedInSession) async throws {
        state.withLock { Self.add(session, to: &$0, capacity: capacity) }
    }

    /// Ends `old` and stores `session` only if `old` is the same account's session, under the lock.
    public func replace(stored old: [UInt8], with session: SignedInSession) async throws -> Bool {
        state.withLock { s in
            guard let held = s.sessions[ByteKey(old)], Bytes.constantTimeEqual(held.userHandle, session.userHandle) else { return false }
            s.sessions.removeValue(forKey: ByteKey(old))
            Self.add(session, to: &s, capacity: capacity)
            return true
        }
    }

    private static func add(_ session: SignedInSession, to s: inout State, capacity: Int) {
        let key = ByteKey(session.idHash)
        if s.sessions.updateValue(session, forKey: key) == nil { s.order.append(key) }
        let u = ByteKey(session.userHandle)
        var queue = s.perUser[u, default: FIFO()]
        queue.append(key)
        queue.compact(liveCount: 0) { s.sessions[$0] != nil }
        while queue.count > SignedInSession.maxPerUser, let old = queue.popFirst() { s.sessions.removeValue(forKey: old) }
        s.perUser[u] = queue
        while s.sessions.count > capacity, let old = s.order.popFirst() { s.sessions.removeValue(forKey: old) }
        var order = FIFO<ByteKey>()
        swap(&order, &s.order)
        order.compact(liveCount: s.sessions.count) { s.sessions[$0] != nil }
        swap(&order, &s.order)
    }

    /// The session with this id hash, if stored (expired or not).
    public func session(idHash: [UInt8]) async throws -> SignedInSession? {
        state.withLock { $0.sessions[ByteKey(idHash)] }
    }

    /// Ends a session; nothing happens when there is none.
    public func delete(idHash: [UInt8]) async throws {
        _ = state.withLock { $0.sessions.removeValue(forKey: ByteKey(idHash)) }
    }

    /// Ends every session of the account; returns how many.
    public func deleteSessions(userHandle: [UInt8]) async throws -> Int {
        state.withLock { s in
            let before = s.sessions.count
            s.sessions = s.sessions.filter { $0.value.userHandle != userHandle }
            s.perUser.removeValue(forKey: ByteKey(userHandle))
            return before - s.sessions.count
        }
    }

    /// A full pass, made once per sweep interval.
    public func sweepSessions(expiredBefore date: Date) async throws -> Int {
        state.withLock { s in
            s.sessions = s.sessions.filter { $0.value.expiresAt >= date }
            var order = FIFO<ByteKey>()
            swap(&order, &s.order)
            order.compact(liveCount: s.sessions.count) { s.sessions[$0] != nil }
            swap(&order, &s.order)
            return s.sessions.count
        }
    }

    /// The number of sessions kept.
    public var count: Int { state.withLock { $0.sessions.count } }
}
