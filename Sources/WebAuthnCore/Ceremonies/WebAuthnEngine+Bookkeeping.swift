public import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The engine's bookkeeping: challenges, finding and consuming pending ceremonies, the
// session binding, the count of pending ceremonies and their sweeps and eviction, and the
// mapping of store errors.
extension WebAuthnEngine {
    static func newChallenge(length: Int) throws(WebAuthnError) -> [UInt8] {
        guard (16...64).contains(length) else {
            throw WebAuthnError(.configurationInvalid, "challenges must be 16 to 64 bytes; asked for \(length)")
        }
        return SecureRandom.bytes(length)
    }

    // MARK: Single-use values

    /// Stores a single-use value (an Apple nonce or web-flow state, or the key of a
    /// notification acted on) under `key`, for `lifetime` seconds on the engine's clock,
    /// bound to `binding` when given (at most an hour; two days for a notification's key).
    /// Counts against the pending-ceremony limits.
    public func storeSingleUse(_ kind: PendingCeremony.Kind, key: [UInt8], binding: [UInt8]?, lifetime: TimeInterval = 600) async throws(WebAuthnError) {
        guard kind == .appleNonce || kind == .appleState || kind == .appleNotification else {
            throw WebAuthnError(
                .configurationInvalid, "single-use values are Apple nonces, states and notifications; \(kind.rawValue) ceremonies start with their options")
        }
        // A notification's key outlives the day a notification is accepted for; nonces and states live an hour at most.
        let longest: TimeInterval = kind == .appleNotification ? 2 * 86_400 : 3600
        guard (16...64).contains(key.count), lifetime > 0, lifetime <= longest else {
            throw WebAuthnError(
                .configurationInvalid, "a single-use key is 16 to 64 bytes and lives at most \(kind == .appleNotification ? "two days" : "an hour")")
        }
        try await remember(
            PendingCeremony(
                kind: kind, challenge: key, userVerification: .discouraged, binding: binding,
                expiresAt: configuredRelyingParty.clock.now().addingTimeInterval(lifetime)))
    }

    /// Whether an unexpired single-use value of this kind is stored under `key`, without consuming it.
    public func isSingleUsePending(_ kind: PendingCeremony.Kind, key: [UInt8]) async throws(WebAuthnError) -> Bool {
        guard let value = try await store({ try await challenges.pending(challenge: key) }) else { return false }
        return value.kind == kind && configuredRelyingParty.clock.now() <= value.expiresAt
    }

    /// Consumes the single-use value under `key`: it must exist with this kind, be
    /// unexpired and, when it was stored with a binding, be presented with the same
    /// one (`challenge_unknown`, `ceremony_mismatch`, `challenge_expired`,
    /// `session_mismatch`). A value of another kind, or presented from another session,
    /// is left as it was: whoever learns a value cannot burn it; an expired one is removed.
    public func consumeSingleUse(_ kind: PendingCeremony.Kind, key: [UInt8], binding: [UInt8]?) async throws(WebAuthnError) {
        let unknown = WebAuthnError(.challengeUnknown, "no \(kind.rawValue) is waiting under this value; it was never issued or was already used")
        guard let pending = try await store({ try await challenges.pending(challenge: key) }) else { throw unknown }
        guard pending.kind == kind else {
            throw WebAuthnError(.ceremonyMismatch, "the value was issued as \(pending.kind.rawValue), not \(kind.rawValue)")
        }
        let now = configuredRelyingParty.clock.now()
        if now <= pending.expiresAt { try Self.verifyBinding(pending, presented: binding) }
        // Of two concurrent consumers, the store's atomic consume lets exactly one through.
        guard let value = try await store({ try await challenges.consume(challenge: key) }), value.kind == kind else { throw unknown }
        guard now <= value.expiresAt else {
            throw WebAuthnError(.challengeExpired, "the \(kind.rawValue) expired at \(ISO8601DateFormatter().string(from: value.expiresAt))")
        }
        try Self.verifyBinding(value, presented: binding)
    }

    /// Finds the pending ceremony a response answers, without consuming it.
    func pendingCeremony(for c: CollectedClientData, kind: PendingCeremony.Kind, expected: [UInt8]?) async throws(WebAuthnError) -> PendingCeremony {
        let key = try Self.challengeKey(c, kind: kind, expected: expected)
        return try checkPending(try await store({ try await challenges.pending(challenge: key) }), key: key, kind: kind)
    }

    /// The ceremony a result answers, checked (known, of `kind`, unexpired, finished by the session
    /// that started it); from a store that reads them together, the record of `credentialId` read
    /// with it (else nil, unread); and that store, which then commits the result in one transaction.
    func pendingCeremony(
        for c: CollectedClientData, kind: PendingCeremony.Kind, expected: [UInt8]?, binding: [UInt8]?, credentialId: [UInt8]
    ) async throws(WebAuthnError) -> (ceremony: PendingCeremony, credential: CredentialRecord?, committing: (any SignInCommitting)?) {
        let key = try Self.challengeKey(c, kind: kind, expected: expected)
        let committing = (challenges as AnyObject) === (credentials as AnyObject) ? challenges as? any SignInCommitting : nil
        let found: PendingCeremony?
        var credential: CredentialRecord?
        if let committing {
            (found, credential) = try await store { try await committing.pending(challenge: key, credentialId: credentialId) }
        } else {
            found = try await store { try await challenges.pending(challenge: key) }
        }
        let ceremony = try checkPending(found, key: key, kind: kind)
        try Self.verifyBinding(ceremony, presented: binding)
        return (ceremony, credential, committing)
    }

    /// The challenge under which a response's ceremony waits: the caller's expected one (which
    /// the client data must carry), or the client data's.
    static func challengeKey(_ c: CollectedClientData, kind: PendingCeremony.Kind, expected: [UInt8]?) throws(WebAuthnError) -> [UInt8] {
        if let expected {
            let step = kind == .registration ? "WebAuthn L3 §7.1 step 8" : "WebAuthn L3 §7.2 step 11"
            try ClientDataChecks.verifyChallenge(c, expected: expected, step: step)
            return expected
        }
        guard let decoded = Base64URL.decode(c.challenge), !decoded.isEmpty else {
            throw WebAuthnError(.challengeUnknown, "clientData.challenge is not base64url")
        }
        return decoded
    }

    /// The ceremony found under `key`, if it is one of `kind` that has not expired by the engine's clock.
    func checkPending(_ found: PendingCeremony?, key: [UInt8], kind: PendingCeremony.Kind) throws(WebAuthnError) -> PendingCeremony {
        guard let ceremony = found else {
            throw WebAuthnError(
                .challengeUnknown,
                "no \(kind.rawValue) ceremony is waiting for challenge \(Base64URL.encode(key).prefix(96)); it was never issued or was already used")
        }
        guard ceremony.kind == kind else {
            throw WebAuthnError(.ceremonyMismatch, "the challenge was issued for \(ceremony.kind.rawValue), not \(kind.rawValue)")
        }
        try Self.verifyUnexpired(ceremony, at: configuredRelyingParty.clock.now())
        return ceremony
    }

    /// The ceremony is finished by the session that started it: a ceremony
    /// started with a binding accepts only a response presenting the same
    /// binding (compared in constant time). This stops a response from being
    /// finished in another browser (login CSRF, a stolen challenge).
    /// A ceremony is answered until its `expiresAt`, on the relying party's clock.
    static func verifyUnexpired(_ ceremony: PendingCeremony, at now: Date) throws(WebAuthnError) {
        guard now <= ceremony.expiresAt else {
            throw WebAuthnError(
                .challengeExpired,
                "the challenge expired at \(ISO8601DateFormatter().string(from: ceremony.expiresAt)); the time is \(ISO8601DateFormatter().string(from: now))")
        }
    }

    static func verifyBinding(_ ceremony: PendingCeremony, presented: [UInt8]?) throws(WebAuthnError) {
        guard let bound = ceremony.binding else { return }
        guard let presented, Bytes.constantTimeEqual(bound, presented) else {
            throw WebAuthnError(
                .sessionMismatch,
                presented == nil
                    ? "the response came without the session that asked for the options"
                    : "the response came with another session than the one that asked for the options")
        }
    }

    /// Stores a new pending ceremony, sweeping expired ones on the engine's
    /// clock every `limits.sweepInterval`, and refusing once
    /// `limits.maxPendingCeremonies` are pending even after a sweep.
    func remember(_ ceremony: PendingCeremony) async throws(WebAuthnError) {
        let now = configuredRelyingParty.clock.now()
        if housekeeping.sweepDue(now: now, limits: limits) {
            do {
                let remaining = try await store { try await challenges.sweep(expiredBefore: now) }
                housekeeping.swept(now: now, remaining: remaining)
            } catch {
                housekeeping.swept(now: now, remaining: nil)
                throw error
            }
        }
        if !housekeeping.admit(limits: limits) {
            // Full: by default the ceremonies that expire first make room (a flood shortens how
            // long a ceremony waits; it cannot block new ones), a hundredth of the limit at a time or
            // as many as requests wait for room.
            // One eviction at a time: the requests that find the engine full meanwhile wait for it
            // and take the room it made. (Each evicting on its own, 300 requests at once dropped
            // 300 hundredths, every pending ceremony, and most of them were refused all the same:
            // red team, thirty-sixth pass.)
            var admitted = false
            if limits.evictOldestWhenFull {
                housekeeping.waiting(+1)
                defer { housekeeping.waiting(-1) }
                let batch = max(1, min(limits.maxPendingCeremonies / 100, 1000))
                let challenges = self.challenges
                for _ in 0..<Housekeeping.maxEvictionRounds where !admitted {
                    let progress = try await store {
                        try await housekeeping.makeRoom(
                            limits: limits, atLeast: batch,
                            recount: { try await challenges.sweep(expiredBefore: now) }, evict: { try await challenges.evictOldest($0) })
                    }
                    admitted = housekeeping.admit(limits: limits)
                    if !progress { break }  // the store had nothing left to evict
                }
            }
            guard admitted else {
                throw WebAuthnError(.tooManyPendingCeremonies, "\(limits.maxPendingCeremonies) ceremonies are pending; try again in a minute")
            }
        }
        do {
            try await store { try await challenges.insert(ceremony) }
        } catch {
            housekeeping.release()
            throw error
        }
    }

    /// Consumes the challenge; exactly one concurrent caller succeeds.
    func consume(_ ceremony: PendingCeremony) async throws(WebAuthnError) {
        guard try await store({ try await challenges.consume(challenge: ceremony.challenge) }) != nil else { throw Self.challengeTaken }
        housekeeping.release()
    }

    static let challengeTaken = WebAuthnError(.challengeUnknown, "the challenge was used by another response at the same time")

    /// Runs a store operation, mapping foreign errors to `storage_failure`.
    func store<T>(_ body: () async throws -> T) async throws(WebAuthnError) -> T {
        do {
            return try await body()
        } catch let error as WebAuthnError {
            throw error
        } catch {
            throw WebAuthnError(.storageFailure, "the store failed: \(error)")
        }
    }
}
/// The engine's count of pending ceremonies between sweeps: an estimate that
/// each sweep resets to the store's true count (several instances sharing a
/// store each keep their own), so no request ever counts or scans the table.
final class Housekeeping: Sendable {
    private struct State {
        var lastSweep: Date?
        var pending = 0
        var sweeping = false
        /// The eviction running, which requests that find the engine full wait for.
        var eviction: Task<Bool, any Error>?
        /// The requests waiting for room: the next eviction makes room for all of them.
        var waiting = 0
    }

    /// The most evictions one request waits through before it is refused (each makes room for a
    /// hundredth of the limit, taken by the requests waiting first).
    static let maxEvictionRounds = 8
    private let state = Locked(State())

    /// Whether this caller should sweep now (one at a time).
    func sweepDue(now: Date, limits: WebAuthnEngine.Limits) -> Bool {
        state.withLock { s in
            guard !s.sweeping else { return false }
            let due = s.lastSweep.map { now.timeIntervalSince($0) >= limits.sweepInterval || now < $0 } ?? true
            guard due || s.pending >= limits.maxPendingCeremonies else { return false }
            s.sweeping = true
            s.lastSweep = now
            return true
        }
    }

    /// Ends a sweep; `remaining` nil when it failed (the estimate stays).
    func swept(now: Date, remaining: Int?) {
        state.withLock { s in
            if let remaining { s.pending = remaining }
            s.sweeping = false
        }
    }

    /// Counts one more pending ceremony, if there is room.
    func admit(limits: WebAuthnEngine.Limits) -> Bool {
        state.withLock { s in
            guard s.pending < limits.maxPendingCeremonies else { return false }
            s.pending += 1
            return true
        }
    }

    func release() { state.withLock { $0.pending = max(0, $0.pending - 1) } }

    /// Counts a request waiting for room (`+1`), or one that got it or gave up (`-1`).
    func waiting(_ change: Int) { state.withLock { $0.waiting += change } }

    /// Makes room for the requests waiting (at least `batch`), one attempt at a time: a caller that
    /// finds one running waits for it, and one that finds room already made does nothing.
    ///
    /// The attempt counts first (`recount`: the store's sweep of expired ceremonies, which
    /// returns how many remain), since the engine's count only estimates: it adds every insert,
    /// while a session's cap drops its oldest in the store. Only what the true count leaves short
    /// is evicted (`evict`, the ceremonies that expire first), and nothing while a batch fits.
    /// (Red team, thirty-sixth pass: one cookie's 14,000 options a second made the estimate full
    /// within a sweep interval while the store held 58, and the evictions took every other
    /// client's ceremony.) Returns whether room may have been made: false when the store had
    /// nothing left to evict.
    func makeRoom(
        limits: WebAuthnEngine.Limits, atLeast batch: Int, recount: @escaping @Sendable () async throws -> Int,
        evict: @escaping @Sendable (Int) async throws -> Int
    ) async throws -> Bool {
        let attempt = state.withLock { s -> Task<Bool, any Error>? in
            if let running = s.eviction { return running }
            guard s.pending >= limits.maxPendingCeremonies else { return nil }
            let wanted = max(batch, min(s.waiting, limits.maxPendingCeremonies))
            let task = Task { [self] in
                do {
                    let remaining = try await recount()
                    // Room for a batch in truth: none evicted (the waiting may be one session's
                    // flood, whose inserts replace its own oldest). Else as many as wait, or a batch.
                    let roomy = remaining + batch <= limits.maxPendingCeremonies
                    let removed = roomy ? 0 : try await evict(max(batch, remaining + wanted - limits.maxPendingCeremonies))
                    state.withLock { s in
                        s.pending = max(0, remaining - removed)
                        s.eviction = nil
                    }
                    return roomy || removed > 0
                } catch {
                    state.withLock { $0.eviction = nil }
                    throw error
                }
            }
            s.eviction = task
            return task
        }
        guard let attempt else { return true }
        return try await attempt.value
    }
}
