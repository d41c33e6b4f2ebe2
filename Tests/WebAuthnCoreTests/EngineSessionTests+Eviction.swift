import Foundation
import Testing
@testable import WebAuthnCore
import _WebAuthnEncoding

/// A challenge store whose evictions take a while, as a database's do, so that requests that find
/// the engine full overlap; it counts the evictions and the ceremonies they removed.
final class SlowEvictionStore: ChallengeStore {
    let inner: InMemoryChallengeStore
    let evictions = Locked((calls: 0, removed: 0))

    init(_ inner: InMemoryChallengeStore) { self.inner = inner }

    func insert(_ ceremony: PendingCeremony) async throws { try await inner.insert(ceremony) }
    func pending(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.pending(challenge: challenge) }
    func consume(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.consume(challenge: challenge) }
    func sweep(expiredBefore date: Date) async throws -> Int {
        try await Task.sleep(for: .milliseconds(20))
        return try await inner.sweep(expiredBefore: date)
    }
    func evictOldest(_ count: Int) async throws -> Int {
        try await Task.sleep(for: .milliseconds(20))
        let removed = try await inner.evictOldest(count)
        evictions.withLock {
            $0.calls += 1; $0.removed += removed
        }
        return removed
    }
}

extension EngineSessionTests {
    /// An engine holding at most `limit` pending ceremonies in a store whose sweeps and evictions take a while.
    func slowEvictionEngine(limit: Int) throws -> (WebAuthnEngine, InMemoryChallengeStore, SlowEvictionStore) {
        let rp = try RelyingParty(id: "example.com", origins: [origin], clock: time.clock, challengeLifetime: 60)
        let memory = InMemoryChallengeStore(clock: time.clock)
        let challenges = SlowEvictionStore(memory)
        let engine = WebAuthnEngine(
            relyingParty: rp, credentials: InMemoryCredentialStore(), challenges: challenges,
            limits: .init(maxPendingCeremonies: limit, sweepInterval: 10_000))
        return (engine, memory, challenges)
    }

    @Test("a burst at the limit waits for one eviction that makes room for all of it: nothing refused, and the newest ceremony kept")
    func evictionBurst() async throws {
        let limit = 1_000
        let (engine, memory, challenges) = try slowEvictionEngine(limit: limit)
        for _ in 0..<limit { _ = try await engine.startAuthentication() }
        time.advance(by: 1)
        // A user's ceremony, the newest when the burst comes.
        let users = try await engine.startAuthentication(binding: [7]).challenge
        let refused = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<300 {
                group.addTask { (try? await engine.startAuthentication()) == nil }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let evictions = challenges.evictions.withLock { $0 }
        // Before: each request evicted a hundredth (10) on its own, 300 at once emptied the store
        // of the flood, and the requests that lost the race for the room were refused.
        #expect(refused == 0, "\(refused) of 300 refused")
        #expect(evictions.removed <= 301 + 2 * 10, "\(evictions.removed) ceremonies evicted for 301 new ones")
        #expect(memory.count <= limit && memory.count >= limit - 2 * 10, "\(memory.count) pending")
        #expect(try await memory.pending(challenge: users) != nil, "the newest ceremony was evicted")
    }

    @Test("the engine's count is an estimate: when it says full, the store's true count decides how many to evict, and one cookie's flood evicts nobody's")
    func evictionRecounts() async throws {
        let limit = 100
        let (engine, memory, challenges) = try slowEvictionEngine(limit: limit)
        // Fifty other clients' ceremonies, then one cookie's flood: the store keeps 8 of it (the
        // per-session cap), but the engine counts every one of them.
        var others: [[UInt8]] = []
        for i in 0..<50 { others.append(try await engine.startAuthentication(binding: [UInt8(i), 1]).challenge) }
        time.advance(by: 1)
        let refused = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<300 {
                group.addTask { (try? await engine.startAuthentication(binding: [9, 9])) == nil }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(refused == 0, "\(refused) of 300 refused")
        // Before: the flood's estimate looked full, and the evictions took the fifty (they expire first).
        var kept = 0
        for challenge in others where try await memory.pending(challenge: challenge) != nil { kept += 1 }
        #expect(kept == others.count, "\(others.count - kept) of the other clients' ceremonies evicted")
        #expect(challenges.evictions.withLock { $0.removed } == 0)
    }
}
