import Foundation
import Testing
import Synchronization
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

/// A fetcher that serves the stand-in's key set, counts calls, can fail and can be slow.
final class CountingFetcher: AppleKeyFetching {
    struct Failure: Error {}
    let standIn: AppleStandIn
    private let state = Mutex((calls: 0, failing: false, delay: Duration.zero))

    init(_ standIn: AppleStandIn) { self.standIn = standIn }

    var calls: Int { state.withLock { $0.calls } }
    func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }
    func setDelay(_ delay: Duration) { state.withLock { $0.delay = delay } }

    func fetchKeySet() async throws -> [UInt8] {
        let (failing, delay) = state.withLock { s -> (Bool, Duration) in
            s.calls += 1
            return (s.failing, s.delay)
        }
        if delay > .zero { try await Task.sleep(for: delay) }
        if failing { throw Failure() }
        return Array(standIn.keySetJSON.utf8)
    }
}

@Suite("Apple key cache")
struct KeyCacheTests {
    let f: TokenFixture
    let fetcher: CountingFetcher
    let time = ManualClock()
    let apple: AppleSignIn

    init() throws {
        f = try TokenFixture()
        fetcher = CountingFetcher(f.standIn)
        let configuration = try SignInWithAppleConfiguration(clientIDs: [TokenFixture.clientID])
        apple = AppleSignIn(configuration: configuration, fetcher: fetcher, clock: time.clock)
    }

    func code(_ token: String) async -> String? {
        do {
            _ = try await apple.verifyIdentityToken(token, nonce: nil)
            return nil
        } catch {
            return error.code.rawValue
        }
    }

    func token(kid: String? = nil) -> String {
        let c = f.standIn.claims(for: f.user, audience: TokenFixture.clientID, nonce: nil, issuedAt: TokenFixture.now)
        return f.standIn.sign(.object(c), header: kid.map { ["kid": .string($0)] } ?? [:])
    }

    @Test("fetched on first use, then kept")
    func firstUse() async {
        #expect(fetcher.calls == 0)
        for _ in 0..<5 { #expect(await code(token()) == nil) }
        #expect(fetcher.calls == 1)
    }

    @Test("a new kid after rotation is fetched once (when a minute has passed since the last fetch)")
    func rotation() async throws {
        #expect(await code(token()) == nil)
        time.advance(61)
        try f.standIn.rotateKeys()
        for _ in 0..<3 { #expect(await code(token()) == nil) }
        #expect(fetcher.calls == 2)
    }

    @Test("a flood of unknown kids costs at most one fetch a minute")
    func flood() async throws {
        #expect(await code(token()) == nil)
        time.advance(61)
        for i in 0..<200 { #expect(await code(token(kid: "made-up-\(i)")) == "apple_key_unknown") }
        #expect(fetcher.calls == 2)
        time.advance(30)
        for i in 0..<50 { _ = await code(token(kid: "more-\(i)")) }
        #expect(fetcher.calls == 2)
        time.advance(31)
        for i in 0..<50 { _ = await code(token(kid: "again-\(i)")) }
        #expect(fetcher.calls == 3)
        // Concurrent floods too.
        time.advance(61)
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<100 { group.addTask { _ = await code(token(kid: "parallel-\(i)")) } }
        }
        #expect(fetcher.calls == 4)
    }

    @Test("one fetch at a time: concurrent first users wait for the same fetch")
    func singleFlight() async throws {
        fetcher.setDelay(.milliseconds(200))
        let results = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<30 { group.addTask { await code(token()) } }
            return await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 == nil })
        #expect(fetcher.calls == 1)
    }

    @Test("the last good set is served when a fetch fails")
    func lastGoodSet() async throws {
        let old = token()
        #expect(await code(old) == nil)
        fetcher.setFailing(true)
        time.advance(61)
        try f.standIn.rotateKeys()
        let fresh = token()
        #expect(await code(fresh) == "apple_key_unknown")  // the refetch failed; the old set answers
        #expect(fetcher.calls == 2)
        #expect(await code(old) == nil)
        fetcher.setFailing(false)
        time.advance(61)
        #expect(await code(fresh) == nil)
        #expect(fetcher.calls == 3)
    }

    @Test("no set ever fetched: apple_jwks_unavailable, retried at most every 5 s")
    func unavailable() async {
        fetcher.setFailing(true)
        #expect(await code(token()) == "apple_jwks_unavailable")
        #expect(await code(token()) == "apple_jwks_unavailable")
        #expect(fetcher.calls == 1)
        time.advance(5)
        fetcher.setFailing(false)
        #expect(await code(token()) == nil)
        #expect(fetcher.calls == 2)
    }

    @Test("an invalid key set from the fetcher does not replace a good one")
    func invalidSetKept() async throws {
        #expect(await code(token()) == nil)
        let cache = AppleKeyCache(fetcher: BrokenFetcher(), clock: time.clock)
        await #expect(throws: WebAuthnError(.appleJWKSUnavailable, "")) { try await cache.keySet(containing: "x") }
    }
}

struct BrokenFetcher: AppleKeyFetching {
    func fetchKeySet() async throws -> [UInt8] { Array(#"{"keys":[],"keys":[]}"#.utf8) }
}
