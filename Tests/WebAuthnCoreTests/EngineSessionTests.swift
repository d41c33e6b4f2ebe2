import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The engine's defences that the HTTP server builds on: a ceremony bound to
/// the session that started it, accounts created only with their first
/// credential, and a bounded number of pending ceremonies swept on the
/// engine's clock.
@Suite("Engine: session binding, new accounts, pending-ceremony bounds")
struct EngineSessionTests {
    let time = EngineTests.movableClock()
    let origin = "https://example.com"

    func engine(limits: WebAuthnEngine.Limits = .init()) throws -> (WebAuthnEngine, InMemoryChallengeStore, InMemoryAccountStore) {
        let rp = try RelyingParty(id: "example.com", origins: [origin], clock: time.clock, challengeLifetime: 60)
        let credentials = InMemoryCredentialStore()
        let challenges = InMemoryChallengeStore(clock: time.clock)
        let accounts = InMemoryAccountStore(credentials: credentials)
        return (WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: challenges, accounts: accounts, limits: limits), challenges, accounts)
    }

    @Test("single-use values (Apple nonces and states) are consumed once, by kind, unexpired, with their binding; never as a WebAuthn challenge")
    func singleUse() async throws {
        let (engine, challenges, _) = try engine()
        let key = SecureRandom.bytes(32)
        try await engine.storeSingleUse(.appleNonce, key: key, binding: [7])
        #expect(await errorCode { try await engine.consumeSingleUse(.appleNonce, key: key, binding: [7]) } == nil)
        #expect(await errorCode { try await engine.consumeSingleUse(.appleNonce, key: key, binding: [7]) } == "challenge_unknown")
        // The wrong kind or the wrong session: refused, and left for its owner (whoever learns a
        // value cannot burn it). Too late: refused and gone.
        for (kind, binding, wait, expected, owner) in [
            (PendingCeremony.Kind.appleState, [UInt8]([7]), 0.0, "ceremony_mismatch", String?.none),
            (.appleNonce, [8], 0, "session_mismatch", nil), (.appleNonce, nil, 0, "session_mismatch", nil),
            (.appleNonce, [7], 61, "challenge_expired", "challenge_unknown"),
        ] {
            let k = SecureRandom.bytes(32)
            try await engine.storeSingleUse(.appleNonce, key: k, binding: [7], lifetime: 60)
            time.advance(by: wait)
            #expect(await errorCode { try await engine.consumeSingleUse(kind, key: k, binding: binding) } == expected)
            #expect(await errorCode { try await engine.consumeSingleUse(.appleNonce, key: k, binding: [7]) } == owner, "\(expected)")
        }
        // A WebAuthn challenge presented as a nonce is refused and still finishes its ceremony.
        let pendingSignIn = try await engine.startAuthentication()
        #expect(await errorCode { try await engine.consumeSingleUse(.appleNonce, key: pendingSignIn.challenge, binding: nil) } == "ceremony_mismatch")
        #expect(try await engine.isSingleUsePending(.appleNonce, key: pendingSignIn.challenge) == false)
        #expect(try await challenges.pending(challenge: pendingSignIn.challenge) != nil)
        // Notification keys: stored, seen, not consumable as a nonce.
        let seen = SecureRandom.bytes(32)
        #expect(try await engine.isSingleUsePending(.appleNotification, key: seen) == false)
        try await engine.storeSingleUse(.appleNotification, key: seen, binding: nil, lifetime: 3600)
        #expect(try await engine.isSingleUsePending(.appleNotification, key: seen))
        #expect(await errorCode { try await engine.consumeSingleUse(.appleNonce, key: seen, binding: nil) } == "ceremony_mismatch")
        // A registration whose client data names a nonce as its challenge is refused for its kind.
        let nonce = SecureRandom.bytes(32)
        try await engine.storeSingleUse(.appleNonce, key: nonce, binding: nil)
        let user = UserEntity.new(name: "mallory")
        let parts = try SoftwareAuthenticator(profile: .platformPasskey).register(rpId: "example.com", origin: origin, challenge: nonce, userHandle: user.id)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) } == "ceremony_mismatch")
        #expect(await errorCode { try await engine.storeSingleUse(.registration, key: SecureRandom.bytes(32), binding: nil) } == "configuration_invalid")
    }

    @Test("a bound ceremony is finished only with its binding; a refusal consumes nothing")
    func binding() async throws {
        let (engine, _, _) = try engine()
        let user = UserEntity.new(name: "alice")
        let key = SoftwareAuthenticator(profile: .platformPasskey)
        let options = try await engine.startRegistration(user: user, newAccount: true, binding: [1, 2, 3])
        let parts = try key.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) } == "session_mismatch")
        #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes, binding: [9]) } == "session_mismatch")
        let credential = try await engine.finishRegistration(json: parts.jsonBytes, binding: [1, 2, 3]).credential
        let request = try await engine.startAuthentication(binding: [4])
        let assertion = try key.authenticate(rpId: "example.com", origin: origin, challenge: request.challenge, credentialId: credential.id)
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: assertion.jsonBytes, binding: [1, 2, 3]) } == "session_mismatch")
        #expect(await errorCode { _ = try await engine.finishAuthentication(json: assertion.jsonBytes, binding: [4]) } == nil)
    }

    @Test("a new account exists only once its registration completes, with its credential; a lost race changes nothing")
    func newAccounts() async throws {
        let (engine, challenges, accounts) = try engine()
        let first = UserEntity.new(name: "bob"), second = UserEntity.new(name: "Bob")
        let a = try await engine.startRegistration(user: first, newAccount: true)
        let b = try await engine.startRegistration(user: second, newAccount: true)
        #expect(try await accounts.account(named: "bob") == nil)
        let keyA = SoftwareAuthenticator(profile: .platformPasskey), keyB = SoftwareAuthenticator(profile: .platformPasskey)
        let partsA = try keyA.register(rpId: "example.com", origin: origin, challenge: a.challenge, userHandle: first.id)
        let partsB = try keyB.register(rpId: "example.com", origin: origin, challenge: b.challenge, userHandle: second.id)
        _ = try await engine.finishRegistration(json: partsA.jsonBytes)
        #expect(try await accounts.account(named: "BOB")?.id == first.id)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: partsB.jsonBytes) } == "username_unavailable")
        #expect(try await engine.credentials.credential(id: partsB.id) == nil)
        // The losing ceremony was given back, untouched.
        #expect(try await challenges.pending(challenge: b.challenge) != nil)
    }

    @Test("a new account's names take their enforced forms in the engine, whoever calls it: full-width folded, bidi and zero-width refused")
    func newAccountNames() async throws {
        // Adopter review: only the package's routes normalised names; an embedding calling the engine stored them as given.
        let (engine, _, accounts) = try engine()
        let wide = try UserEntity(id: SecureRandom.bytes(16), name: "ｃａｒｏｌ", displayName: "  Carol   C.  ")
        let options = try await engine.startRegistration(user: wide, newAccount: true)
        #expect(options.user.name == "carol" && options.user.displayName == "Carol C.")
        let parts = try SoftwareAuthenticator(profile: .platformPasskey).register(
            rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: wide.id)
        _ = try await engine.finishRegistration(json: parts.jsonBytes)
        #expect(try await accounts.account(handle: wide.id)?.name == "carol")
        for name in ["dave\u{202E}", "e\u{200B}ve", "fr ank", ""] {
            #expect(
                await errorCode { _ = try await engine.startRegistration(user: UserEntity.new(name: name), newAccount: true) } == "username_invalid", "\(name)")
        }
        #expect(
            await errorCode { _ = try await engine.startRegistration(user: UserEntity.new(name: "gina", displayName: "G\u{202E}"), newAccount: true) }
                == "username_invalid")
        // Not a new account: the host's own users are named as the host names them.
        #expect(await errorCode { _ = try await engine.startRegistration(user: UserEntity.new(name: "Host User 1")) } == nil)
    }

    @Test("a credential for an account of the account store is stored only while the account exists; a host's own users are not checked")
    func addingToAccount() async throws {
        let (engine, _, accounts) = try engine()
        let key = SoftwareAuthenticator(profile: .platformPasskey)
        // Started while the account exists, by the engine's read or the caller's word (the server
        // passes what it found: red team, a deletion between its read and a second one here left
        // the ceremony unchecked); the account deleted before the result: nothing is stored.
        for said in [nil, true] as [Bool?] {
            let ada = UserEntity.new(name: "ada")
            let first = try await engine.startRegistration(user: ada, newAccount: true)
            _ = try await engine.finishRegistration(
                json: try key.register(rpId: "example.com", origin: origin, challenge: first.challenge, userHandle: ada.id).jsonBytes)
            let options = try await engine.startRegistration(user: ada, addingToAccount: said)
            #expect(try await accounts.deleteAccount(handle: ada.id))
            let parts = try SoftwareAuthenticator(profile: .platformPasskey).register(
                rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: ada.id)
            #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) } == "account_unknown", "\(String(describing: said))")
            #expect(try await engine.credentials.credential(id: parts.id) == nil)
        }
        // The caller found the account, which is deleted before the options are made (the red
        // team's race, 144 credentials of no account in 30 rounds on PostgreSQL): still checked.
        let bea = UserEntity.new(name: "bea")
        let made = try await engine.startRegistration(user: bea, newAccount: true)
        _ = try await engine.finishRegistration(
            json: try key.register(rpId: "example.com", origin: origin, challenge: made.challenge, userHandle: bea.id).jsonBytes)
        #expect(try await accounts.deleteAccount(handle: bea.id))
        let late = try await engine.startRegistration(user: bea, addingToAccount: true)
        let orphan = try SoftwareAuthenticator(profile: .platformPasskey).register(
            rpId: "example.com", origin: origin, challenge: late.challenge, userHandle: bea.id)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: orphan.jsonBytes) } == "account_unknown")
        // A user the host keeps elsewhere (not in the account store): registered as before.
        let guest = UserEntity.new(name: "guest")
        let options = try await engine.startRegistration(user: guest)
        let parts = try key.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: guest.id)
        #expect(await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) } == nil)
    }

    @Test("conditional create relaxes user presence only when the relying party asked for it")
    func conditionalCreate() async throws {
        let (engine, _, _) = try engine()
        let user = UserEntity.new(name: "carol")
        let key = SoftwareAuthenticator(profile: .platformPasskey)
        for relaxed in [false, true] {
            let options = try await engine.startRegistration(user: user, newAccount: true, conditionalCreate: relaxed)
            var parts = try key.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
            parts.authenticatorData.flags.remove(.userPresent)
            let code = await errorCode { _ = try await engine.finishRegistration(json: parts.jsonBytes) }
            #expect(code == (relaxed ? nil : "user_presence_missing"))
        }
    }

    @Test("pending ceremonies are bounded: a full engine drops those that expire first, so a flood cannot block a new ceremony")
    func evictsWhenFull() async throws {
        let (engine, challenges, _) = try engine(limits: .init(maxPendingCeremonies: 20, sweepInterval: 10))
        var flood: [[UInt8]] = []
        for _ in 0..<20 {
            flood.append(try await engine.startAuthentication().challenge)
            time.advance(by: 0.01)
        }
        // One more: the oldest makes room; the store never holds more than the limit.
        let user = UserEntity.new(name: "erin")
        let key = SoftwareAuthenticator(profile: .platformPasskey)
        _ = try await engine.startRegistration(user: user, newAccount: true)
        #expect(challenges.count <= 20)
        #expect(try await challenges.pending(challenge: flood[0]) == nil, "the oldest was not dropped")
        #expect(try await challenges.pending(challenge: flood[19]) != nil, "a recent one was dropped")
        for _ in 0..<100 { _ = try await engine.startAuthentication() }
        #expect(challenges.count <= 20)
        // The newest ceremony still finishes (a real user's, amid the flood, as long as it is not the oldest).
        let recent = try await engine.startRegistration(user: user, newAccount: true)
        let parts = try key.register(rpId: "example.com", origin: origin, challenge: recent.challenge, userHandle: user.id)
        #expect(try await engine.finishRegistration(json: parts.jsonBytes).createdAccount)
    }

    @Test("pending ceremonies are bounded: with eviction off, refused at the limit, room again once a sweep on the engine's clock removes expired ones")
    func bounded() async throws {
        let (engine, challenges, _) = try engine(limits: .init(maxPendingCeremonies: 20, sweepInterval: 10, evictOldestWhenFull: false))
        for _ in 0..<20 { _ = try await engine.startAuthentication() }
        #expect(await errorCode { _ = try await engine.startAuthentication() } == "too_many_pending_ceremonies")
        #expect(challenges.count == 20)
        time.advance(by: 61)  // past the 60 s lifetime
        _ = try await engine.startAuthentication()
        #expect(challenges.count == 1)
        // A consumed challenge frees its place.
        time.advance(by: 11)
        let user = UserEntity.new(name: "dan")
        let key = SoftwareAuthenticator(profile: .platformPasskey)
        let options = try await engine.startRegistration(user: user, newAccount: true)
        let parts = try key.register(rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id)
        _ = try await engine.finishRegistration(json: parts.jsonBytes)
        #expect(challenges.count == 1)
    }

    @Test("one binding keeps at most maxPerBinding pending ceremonies; the in-memory store stays O(1) under a flood")
    func perBinding() async throws {
        let (engine, challenges, _) = try engine()
        var issued: [[UInt8]] = []
        for _ in 0..<50 { issued.append(try await engine.startAuthentication(binding: [7]).challenge) }
        #expect(challenges.count == PendingCeremony.maxPerBinding)
        #expect(try await challenges.pending(challenge: issued.last!) != nil)
        #expect(try await challenges.pending(challenge: issued.first!) == nil)
        // A flood of unbound ceremonies at the store's capacity: each insert is O(1) (no scan), so 20,000 take well under a second each 1,000.
        let small = InMemoryChallengeStore(clock: time.clock, capacity: 1_000)
        for i in 0..<20_000 {
            try await small.insert(
                PendingCeremony(
                    kind: .authentication, challenge: SecureRandom.bytes(16) + [UInt8(i & 0xff)], userVerification: .preferred,
                    expiresAt: time.clock.now().addingTimeInterval(60)))
        }
        #expect(small.count == 1_000)
    }

    @Test("the in-memory store never drops a handled notification's key to make room; it sweeps it when it expires")
    func notificationKeysKept() async throws {
        // Red team (eleventh pass): the in-memory store dropped in insertion order, so a flood dropped
        // the notification keys first, and a captured notification replayed after it acted again.
        let store = InMemoryChallengeStore(clock: time.clock, capacity: 100)
        let key = SecureRandom.bytes(32)
        try await store.insert(
            PendingCeremony(kind: .appleNotification, challenge: key, userVerification: .discouraged, expiresAt: time.clock.now().addingTimeInterval(86_400)))
        for _ in 0..<500 {
            try await store.insert(
                PendingCeremony(
                    kind: .authentication, challenge: SecureRandom.bytes(16), userVerification: .preferred, expiresAt: time.clock.now().addingTimeInterval(60)))
        }
        #expect(try await store.evictOldest(1_000) == 100)
        #expect(try await store.pending(challenge: key)?.kind == .appleNotification)
        #expect(try await store.sweep(expiredBefore: time.clock.now().addingTimeInterval(3_600)) == 1)
        #expect(try await store.sweep(expiredBefore: time.clock.now().addingTimeInterval(90_000)) == 0)
        #expect(try await store.pending(challenge: key) == nil)
    }

    @Test("a challenge given back and taken again many times keeps the in-memory queue short (no quadratic compaction)")
    func reinsertion() async throws {
        let store = InMemoryChallengeStore(clock: time.clock)
        let ceremony = PendingCeremony(
            kind: .authentication, challenge: SecureRandom.bytes(32), userVerification: .preferred,
            expiresAt: time.clock.now().addingTimeInterval(60))
        for _ in 0..<5_000 {
            try await store.insert(ceremony)
            _ = try await store.consume(challenge: ceremony.challenge)
            try await store.insert(ceremony)
        }
        #expect(store.count == 1)
        #expect(store.queueLength <= 2 * 1 + 65)
    }
}
