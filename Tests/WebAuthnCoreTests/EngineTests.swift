import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The stateful API: challenges consumed once, expiry on the engine clock,
/// atomic commits, and nothing stored changed by a failed ceremony.
@Suite("Engine: ceremonies against stores")
struct EngineTests {
    /// The tests' clock (`WebAuthnTesting.TestClock`), standing at 2030-01-01 until moved.
    static func movableClock() -> TestClock { TestClock(Date(timeIntervalSince1970: 1_893_456_000)) }

    let time = EngineTests.movableClock()
    let credentials = InMemoryCredentialStore()
    let challenges: InMemoryChallengeStore
    let engine: WebAuthnEngine
    let user = UserEntity.new(name: "alice")
    let origin = "https://example.com"

    init() throws {
        challenges = InMemoryChallengeStore(clock: time.clock)
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"], clock: time.clock, challengeLifetime: 60)
        engine = WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: challenges)
    }

    func register(_ authenticator: SoftwareAuthenticator) async throws -> CredentialRecord {
        let options = try await engine.startRegistration(user: user)
        let parts = try authenticator.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        return try await engine.finishRegistration(json: parts.jsonBytes).credential
    }

    @Test("options carry the challenge, algorithms and the user's credentials")
    func options() async throws {
        let credential = try await register(SoftwareAuthenticator())
        let creation = try await engine.startRegistration(user: user)
        #expect(creation.challenge.count == 32)
        let json = creation.json
        #expect(json["excludeCredentials"]?.arrayValue?.first?["id"]?.stringValue == Base64URL.encode(credential.id))
        #expect(json["pubKeyCredParams"]?.arrayValue?.first?["alg"]?.intValue == -7)
        #expect(json["rp"]?["id"]?.stringValue == "example.com")
        #expect(json["user"]?["id"]?.stringValue == Base64URL.encode(user.id))
        #expect(json["challenge"]?.stringValue == Base64URL.encode(creation.challenge))
        let request = try await engine.startAuthentication(userHandle: user.id)
        #expect(request.json["allowCredentials"]?.arrayValue?.count == 1)
        #expect(request.json["rpId"]?.stringValue == "example.com")
        let discoverable = try await engine.startAuthentication()
        #expect(discoverable.allowCredentials.isEmpty)
        #expect(await errorCode { _ = try await engine.startRegistration(user: user, challengeLength: 8) } == "configuration_invalid")
    }

    @Test("a user holds at most Limits.maxCredentialsPerUser credentials: checked at the start and again before storing")
    func credentialLimit() async throws {
        let limited = WebAuthnEngine(
            relyingParty: engine.relyingParty, credentials: credentials, challenges: challenges,
            limits: WebAuthnEngine.Limits(maxCredentialsPerUser: 3))
        func finish(_ options: CreationOptions) async throws -> RegistrationResult {
            let parts = try SoftwareAuthenticator().register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
            return try await limited.finishRegistration(json: parts.jsonBytes)
        }
        _ = try await finish(try await limited.startRegistration(user: user))
        _ = try await finish(try await limited.startRegistration(user: user))
        // Two ceremonies started while the user holds 2: one finishes (3), the other may not pass the limit.
        let early = try await limited.startRegistration(user: user)
        _ = try await finish(try await limited.startRegistration(user: user))
        #expect(await errorCode { _ = try await finish(early) } == "credential_limit_reached")
        #expect(credentials.count == 3, "nothing is stored past the limit")
        #expect(await errorCode { _ = try await limited.startRegistration(user: user) } == "credential_limit_reached")
        // Another user, and a new account, are not affected.
        #expect(try await limited.startRegistration(user: UserEntity.new(name: "bob")).challenge.count == 32)
        #expect(WebAuthnEngine.Limits().maxCredentialsPerUser == 32 && WebAuthnEngine.Limits(maxCredentialsPerUser: 0).maxCredentialsPerUser == 1)
    }

    @Test("register then sign in, discoverable and by username; the counter is stored")
    func fullFlow() async throws {
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let credential = try await register(authenticator)
        #expect(credentials.count == 1)
        for userHandle in [nil, user.id] {
            let request = try await engine.startAuthentication(userHandle: userHandle)
            let assertion = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id)
            let result = try await engine.finishAuthentication(json: assertion.jsonBytes)
            #expect(result.userHandle == user.id)
        }
        #expect(credentials.lookup(id: credential.id)?.signCount == 2)
        #expect(challenges.count == 0)
    }

    @Test("an unknown credential's signature is checked against a decoy key before credential_unknown, as a known one's would be")
    func unknownCredentialDecoy() async throws {
        // Red team, sixth pass: a stand-in credential ID failed 80 to 100 µs sooner than a real one
        // with a wrong signature (the verification it skipped). Counted, not timed.
        let stranger = SoftwareAuthenticator()
        let registered = try await register(SoftwareAuthenticator())
        // A credential the authenticator holds and the engine never saw.
        let unseen = try stranger.register(rpId: "example.com", origin: origin, challenge: SecureRandom.bytes(32), userHandle: user.id).id
        let request = try await engine.startAuthentication(userHandle: nil)
        let unknown = try stranger.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: unseen)
        let before = WebAuthnEngine.decoyChecks.withLock { $0 }
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: unknown.jsonBytes) } == "credential_unknown")
        #expect(WebAuthnEngine.decoyChecks.withLock { $0 } > before, "the decoy verification ran")
        // Outside allowCredentials, known or not, step 5 answers first, as before.
        let listed = try await engine.startAuthentication(userHandle: user.id)
        let outside = try stranger.authenticate(rpId: "example.com", origin: origin, challenge: listed.challenge, credentialId: unseen)
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: outside.jsonBytes) } == "credential_not_allowed")
        #expect(WebAuthnEngine.decoyKey != nil && credentials.lookup(id: registered.id) != nil)
        // The decoy fails where a registered credential would: the signature, or an earlier step
        // (red team, seventh pass: a wrong origin answered later for a stand-in than for a real ID).
        let rp = engine.relyingParty
        let ceremony = PendingCeremony(kind: .authentication, challenge: request.challenge, userVerification: .preferred, expiresAt: .distantFuture)
        func decoy(_ parts: AssertionParts) throws -> String? {
            WebAuthnEngine.verifyWithDecoy(
                parts.response, clientData: try CollectedClientData(bytes: parts.response.clientDataJSON), ceremony: ceremony, relyingParty: rp)?.rawValue
        }
        #expect(try decoy(unknown) == "signature_invalid")
        let elsewhere = try stranger.authenticate(rpId: "example.com", origin: "https://evil.example", challenge: request.challenge, credentialId: unseen)
        #expect(try decoy(elsewhere) == "origin_not_allowed")
    }

    /// A credential store that takes an existing ID without a word (the engine must not rely on the store for step 27).
    final class LaxCredentials: CredentialStore {
        let inner = InMemoryCredentialStore()
        func credential(id: [UInt8]) async throws -> CredentialRecord? { try await inner.credential(id: id) }
        func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] { try await inner.credentials(forUser: userHandle) }
        func insert(_ record: CredentialRecord) async throws { if try await inner.credential(id: record.id) == nil { try await inner.insert(record) } }
        func update(_ record: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
            try await inner.update(record, expectedSignCount: expectedSignCount)
        }
        func delete(id: [UInt8]) async throws -> Bool { try await inner.delete(id: id) }
    }

    /// A challenge store where another process consumes every ceremony between its look-up and its consumption.
    final class RacedChallenges: ChallengeStore {
        let inner: InMemoryChallengeStore
        init(clock: WebAuthnClock) { inner = InMemoryChallengeStore(clock: clock) }
        func insert(_ ceremony: PendingCeremony) async throws { try await inner.insert(ceremony) }
        func pending(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.pending(challenge: challenge) }
        func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
            _ = try await inner.consume(challenge: challenge)
            return nil
        }
        func sweep(expiredBefore date: Date) async throws -> Int { try await inner.sweep(expiredBefore: date) }
    }

    @Test("§7.1 step 27 is the engine's own: an ID registered already is refused even by a store that would take it again")
    func step27WithoutTheStore() async throws {
        // Mutation testing: without the engine's check the in-memory store's refusal answered the same.
        let lax = LaxCredentials()
        let rp = try RelyingParty(id: "example.com", origins: [origin], clock: time.clock)
        let engine = WebAuthnEngine(relyingParty: rp, credentials: lax, challenges: InMemoryChallengeStore(clock: time.clock))
        let authenticator = SoftwareAuthenticator()
        let first = try await engine.startRegistration(user: user)
        let parts = try authenticator.register(rpId: "example.com", origin: origin, challenge: first.challenge, userHandle: user.id)
        _ = try await engine.finishRegistration(json: parts.jsonBytes)
        let second = try await engine.startRegistration(user: UserEntity.new(name: "mallory"))
        var again = try SoftwareAuthenticator().register(rpId: "example.com", origin: origin, challenge: second.challenge, userHandle: second.user.id)
        again.id = parts.id
        again.authenticatorData.attested?.credentialId = parts.id
        #expect(await errorCode { _ = try await engine.finishRegistration(json: again.jsonBytes) } == "credential_already_registered")
        #expect(try await lax.credential(id: parts.id)?.userHandle == user.id, "the first owner keeps it")
    }

    @Test("a registration whose ceremony another process consumed between its look-up and its commit stores nothing and fails")
    func registrationConsumedMeanwhile() async throws {
        // Mutation testing: with the commit's outcome ignored, this answered success and stored nothing.
        let credentials = InMemoryCredentialStore()
        let rp = try RelyingParty(id: "example.com", origins: [origin], clock: time.clock)
        let engine = WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: RacedChallenges(clock: time.clock))
        let options = try await engine.startRegistration(user: user)
        let parts = try SoftwareAuthenticator().register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) } == "challenge_unknown")
        #expect(credentials.count == 0)
    }

    @Test("a replayed response is refused: the challenge is consumed once")
    func replay() async throws {
        let authenticator = SoftwareAuthenticator()
        let credential = try await register(authenticator)
        let request = try await engine.startAuthentication(userHandle: user.id)
        let assertion = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id)
        _ = try await engine.finishAuthentication(json: assertion.jsonBytes)
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: assertion.jsonBytes) } == "challenge_unknown")
    }

    @Test("an expired challenge is refused, by the engine's clock")
    func expiry() async throws {
        let authenticator = SoftwareAuthenticator()
        let options = try await engine.startRegistration(user: user)
        let parts = try authenticator.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        time.advance(by: 61)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) } == "challenge_expired")
        #expect(credentials.count == 0)
    }

    @Test("TestClock stands still until moved; the engine reads it at each check (59 s of a 60 s lifetime: accepted)")
    func testClock() async throws {
        let clock = TestClock(Date(timeIntervalSince1970: 1_000))
        #expect(clock.now == Date(timeIntervalSince1970: 1_000))
        #expect(clock.clock.now() == Date(timeIntervalSince1970: 1_000))
        clock.advance(by: 30)
        #expect(clock.clock.now() == Date(timeIntervalSince1970: 1_030))
        clock.advance(by: -40)
        #expect(clock.now == Date(timeIntervalSince1970: 990))
        clock.set(Date(timeIntervalSince1970: 5))
        #expect(clock.clock.now() == Date(timeIntervalSince1970: 5))
        let authenticator = SoftwareAuthenticator()
        let options = try await engine.startRegistration(user: user)
        #expect(options.timeout == 60_000)
        let parts = try authenticator.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        time.advance(by: 59)
        _ = try await engine.finishRegistration(json: parts.jsonBytes)
        #expect(credentials.count == 1)
    }

    @Test("a challenge answers only its own kind of ceremony, and the session's challenge is checked")
    func ceremonyKind() async throws {
        let authenticator = SoftwareAuthenticator()
        let credential = try await register(authenticator)
        let creation = try await engine.startRegistration(user: user)
        let assertion = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: creation.challenge, credentialId: credential.id)
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: assertion.jsonBytes) } == "ceremony_mismatch")
        let request = try await engine.startAuthentication(userHandle: user.id)
        let other = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id)
        #expect(
            await errorCode { _ = try await engine.finishAuthentication(json: other.jsonBytes, expectedChallenge: creation.challenge) } == "challenge_mismatch")
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: other.jsonBytes, expectedChallenge: request.challenge) } == nil)
    }

    @Test("a failed ceremony changes nothing stored")
    func failureChangesNothing() async throws {
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let credential = try await register(authenticator)
        let request = try await engine.startAuthentication(userHandle: user.id)
        var assertion = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id)
        assertion.signature[8] ^= 1
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: assertion.jsonBytes) } == "signature_invalid")
        #expect(challenges.count == 1)  // the challenge is still pending
        #expect(credentials.lookup(id: credential.id)?.signCount == 0)
        #expect(credentials.lookup(id: credential.id)?.lastUsedAt == nil)

        let options = try await engine.startRegistration(user: user)
        var bad = try authenticator.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        bad.clientData.origin = "https://evil.example"
        #expect(await errorCode { _ = try await engine.finishRegistration(json: bad.jsonBytes) } == "origin_not_allowed")
        #expect(credentials.count == 1)
        #expect(challenges.count == 2)
    }

    @Test("§7.1 step 27: a credential ID registered before is refused")
    func duplicateCredential() async throws {
        let authenticator = SoftwareAuthenticator()
        let options = try await engine.startRegistration(user: user)
        let parts = try authenticator.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        _ = try await engine.finishRegistration(json: parts.jsonBytes)
        let again = try await engine.startRegistration(user: UserEntity.new(name: "bob"))
        var copy = parts
        copy.clientData.challenge = again.challenge
        #expect(await errorCode { _ = try await engine.finishRegistration(json: copy.jsonBytes) } == "credential_already_registered")
        #expect(challenges.count == 1)
    }

    @Test("the same assertion submitted by 32 concurrent tasks succeeds exactly once")
    func concurrentReplay() async throws {
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let credential = try await register(authenticator)
        let request = try await engine.startAuthentication(userHandle: user.id)
        let body = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id).jsonBytes
        let engine = self.engine
        let outcomes = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<32 { group.addTask { await errorCode { _ = try await engine.finishAuthentication(json: body) } } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 1)
        #expect(outcomes.allSatisfy { $0 == nil || $0 == "challenge_unknown" })
        #expect(credentials.lookup(id: credential.id)?.signCount == 1)
    }

    /// A store whose first look-up of a challenge answers as it stood before (a stale read).
    final class StaleOnce: ChallengeStore, @unchecked Sendable {
        let inner: InMemoryChallengeStore
        var snapshot: PendingCeremony?
        init(clock: WebAuthnClock) { inner = InMemoryChallengeStore(clock: clock) }
        func insert(_ ceremony: PendingCeremony) async throws { try await inner.insert(ceremony) }
        func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
            if let stale = snapshot {
                snapshot = nil
                return stale
            }
            return try await inner.pending(challenge: challenge)
        }
        func consume(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.consume(challenge: challenge) }
        func sweep(expiredBefore date: Date) async throws -> Int { try await inner.sweep(expiredBefore: date) }
    }

    @Test("a replay that read the challenge before its original consumed it is challenge_unknown, not counter_regression")
    func replayRacingItsOriginal() async throws {
        // CI, under the thread sanitizer: among 32 concurrent submissions of one assertion, one
        // read the pending challenge, then the credential after the original had advanced its
        // counter, and failed counter_regression. The interleaving made deterministic here.
        let stale = StaleOnce(clock: time.clock)
        let rp = try RelyingParty(id: "example.com", origins: [origin], clock: time.clock)
        let engine = WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: stale)
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let options = try await engine.startRegistration(user: user)
        let parts = try authenticator.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        let credential = try await engine.finishRegistration(json: parts.jsonBytes).credential
        let request = try await engine.startAuthentication(userHandle: user.id)
        let body = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id).jsonBytes
        let before = try #require(try await stale.inner.pending(challenge: request.challenge))
        _ = try await engine.finishAuthentication(json: body)  // the original: consumes, counter to 1
        stale.snapshot = before  // the replay's look-up happened before that
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: body) } == "challenge_unknown")
        #expect(credentials.lookup(id: credential.id)?.signCount == 1)
    }

    @Test("the same registration submitted by 32 concurrent tasks stores one credential")
    func concurrentRegistration() async throws {
        let options = try await engine.startRegistration(user: user)
        let body = try SoftwareAuthenticator().register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id).jsonBytes
        let engine = self.engine
        let outcomes = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<32 { group.addTask { await errorCode { _ = try await engine.finishRegistration(json: body) } } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 1)
        #expect(credentials.count == 1)
    }

    @Test("two different assertions with the same counter: the compare-and-set lets one through")
    func counterCompareAndSet() async throws {
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let credential = try await register(authenticator)
        var bodies: [[UInt8]] = []
        for _ in 0..<2 {
            let request = try await engine.startAuthentication(userHandle: user.id)
            var a = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id)
            a.authenticatorData.signCount = 1
            bodies.append(try authenticator.resign(a).jsonBytes)
        }
        let engine = self.engine
        let outcomes = await withTaskGroup(of: String?.self) { group in
            for body in bodies { group.addTask { await errorCode { _ = try await engine.finishAuthentication(json: body) } } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 1)
        #expect(outcomes.allSatisfy { $0 == nil || $0 == "counter_regression" || $0 == "concurrent_update" })
        #expect(credentials.lookup(id: credential.id)?.signCount == 1)
    }

    @Test("a store failure is storage_failure, and nothing is half-applied")
    func storeFailure() async throws {
        struct Broken: ChallengeStore {
            struct Down: Error {}
            func insert(_ ceremony: PendingCeremony) async throws { throw Down() }
            func pending(challenge: [UInt8]) async throws -> PendingCeremony? { throw Down() }
            func consume(challenge: [UInt8]) async throws -> PendingCeremony? { throw Down() }
            func sweep(expiredBefore date: Date) async throws -> Int { throw Down() }
        }
        let broken = WebAuthnEngine(relyingParty: engine.relyingParty, credentials: credentials, challenges: Broken())
        #expect(await errorCode { _ = try await broken.startRegistration(user: user) } == "storage_failure")
    }

    @Test("configuration is validated")
    func configuration() {
        #expect(errorCode { _ = try RelyingParty(id: "example.com", origins: []) } == "configuration_invalid")
        #expect(errorCode { _ = try RelyingParty(id: "example.com", origins: ["https://example.com/path"]) } == "configuration_invalid")
        #expect(errorCode { _ = try RelyingParty(id: "Example.com", origins: ["https://example.com"]) } == "configuration_invalid")
        #expect(errorCode { _ = try RelyingParty(id: "example.com", origins: ["example.com"]) } == "configuration_invalid")
        #expect(errorCode { _ = try UserEntity(id: [], name: "x") } == "configuration_invalid")
        #expect(errorCode { _ = try RelyingParty(id: "example.com", origins: ["https://example.com", "android:apk-key-hash:abc"]) } == nil)
    }
}
