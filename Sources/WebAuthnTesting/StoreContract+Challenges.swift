internal import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The contract checks of challenge stores: ceremonies consumed once, sign-in commits, bounds and eviction.
extension StoreContract {
    static func signInCommitCheck(_ stores: Stores) async throws {
        guard let store = stores.challenges as? any SignInCommitting, (stores.challenges as AnyObject) === (stores.credentials as AnyObject) else {
            return  // the engine consumes, then updates: the challenges and compareAndSet checks cover it
        }
        var r = try record(count: 5)
        try await store.insert(r)
        func pending(_ c: PendingCeremony) async throws -> PendingCeremony { try await store.insert(c); return c }
        func count() async throws -> UInt32 { try require(try await store.credential(id: r.id), "the credential").signCount }
        let first = try await pending(try ceremony(binding: nil))
        r.signCount = 6
        r.backupState = true
        r.uvInitialized = true
        r.lastUsedAt = Date(timeIntervalSince1970: 1_850_000_000)
        try expect(try await store.commitSignIn(consuming: first.challenge, updating: r, expectedSignCount: 5) == .committed)
        let back = try require(try await store.credential(id: r.id), "the credential")
        try expect(back.signCount == 6 && back.backupState && back.uvInitialized && back.lastUsedAt == r.lastUsedAt, "the update is written")
        try expect(try await store.pending(challenge: first.challenge) == nil, "the challenge is consumed")
        // The same challenge again: gone, and nothing written.
        r.signCount = 7
        try expect(try await store.commitSignIn(consuming: first.challenge, updating: r, expectedSignCount: 6) == .challengeGone)
        try expect(try await count() == 6, "a commit without its challenge writes nothing")
        // A stale counter: the challenge is spent, the record not written.
        let stale = try await pending(try ceremony(binding: nil))
        try expect(try await store.commitSignIn(consuming: stale.challenge, updating: r, expectedSignCount: 5) == .counterChanged)
        try expect(try await count() == 6, "a stale counter writes nothing")
        try expect(try await store.pending(challenge: stale.challenge) == nil, "a stale counter spends the challenge")
        // Concurrent commits of one challenge: exactly one commits.
        let raced = try await pending(try ceremony(binding: nil))
        let candidate = r
        let outcomes = await withTaskGroup(of: SignInCommit?.self) { group in
            for _ in 0..<8 { group.addTask { try? await store.commitSignIn(consuming: raced.challenge, updating: candidate, expectedSignCount: 6) } }
            return await group.reduce(into: [SignInCommit?]()) { $0.append($1) }
        }
        try expect(outcomes.filter { $0 == .committed }.count == 1 && outcomes.filter { $0 == .challengeGone }.count == 7, "\(outcomes)")
        try expect(try await count() == 7)
        // Concurrent commits of two challenges from one counter: exactly one writes.
        let a = try await pending(try ceremony(binding: nil)), b = try await pending(try ceremony(binding: nil))
        r.signCount = 8
        let next = r
        async let one = store.commitSignIn(consuming: a.challenge, updating: next, expectedSignCount: 7)
        async let two = store.commitSignIn(consuming: b.challenge, updating: next, expectedSignCount: 7)
        let both = [try await one, try await two]
        try expect(both.filter { $0 == .committed }.count == 1 && both.filter { $0 == .counterChanged }.count == 1, "\(both)")
    }

    static func challengesCheck(_ stores: Stores) async throws {
        let challenges = stores.challenges
        let c = try ceremony()
        try await challenges.insert(c)
        let peeked = try require(try await challenges.pending(challenge: c.challenge), "a value")
        try expect(peeked.user == c.user && peeked.algorithms == c.algorithms && peeked.allowCredentials == c.allowCredentials)
        try expect(peeked.userVerification == .required && peeked.conditionalCreate && peeked.newAccount && peeked.expiresAt == c.expiresAt)
        try expect(peeked.binding == [7, 7, 7])
        try expect(
            peeked.residentKey == .required && peeked.authenticatorAttachment == .platform && peeked.credentialProtection == c.credentialProtection,
            "the requested properties did not round-trip")
        let consumers = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { (try? await challenges.consume(challenge: c.challenge)) != nil } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        try expect(consumers == 1)
        try expect(try await challenges.pending(challenge: c.challenge) == nil)
        // A sign-in by name lists every credential of the account: 64 of the longest IDs (1,023
        // bytes) make a stored ceremony of about 90 KB, past the 64 KiB a client's JSON may have.
        // It reads back whole, alone and with its credential (red team: a store read it with the
        // client limit, and the account could no longer sign in by name).
        let long = (0..<64).map { _ in SecureRandom.bytes(1023) }
        let listed = PendingCeremony(
            kind: .authentication, challenge: SecureRandom.bytes(32), userHandle: [1, 2], allowCredentials: long,
            userVerification: .preferred, expiresAt: Date(timeIntervalSince1970: 1_900_000_000.5))
        try expect(listed.serialized.count > 65_536, "the ceremony is past the client limit")
        try await challenges.insert(listed)
        try expect(try await challenges.pending(challenge: listed.challenge)?.allowCredentials == long, "a long ceremony reads back")
        if let oneRead = challenges as? any SignInCommitting {
            try expect(try await oneRead.pending(challenge: listed.challenge, credentialId: long[0]).ceremony?.allowCredentials == long)
        }
        try expect(try await challenges.consume(challenge: listed.challenge)?.allowCredentials == long, "a long ceremony is consumed whole")
        // A registration to an existing account keeps that it is one (its credential needs the account still there).
        let adding = PendingCeremony(
            kind: .registration, challenge: SecureRandom.bytes(32), user: try UserEntity(id: [3, 4], name: "ada", displayName: "Ada"),
            userVerification: .preferred, addsToAccount: true, expiresAt: Date(timeIntervalSince1970: 1_900_000_000.5))
        try await challenges.insert(adding)
        try expect(try await challenges.consume(challenge: adding.challenge)?.addsToAccount == true, "addsToAccount reads back")
    }

    static func challengeBoundsCheck(_ stores: Stores) async throws {
        let challenges = stores.challenges
        let binding = SecureRandom.bytes(32)
        var issued: [[UInt8]] = []
        for i in 0..<(PendingCeremony.maxPerBinding + 4) {
            let c = try ceremony(binding: binding, expiresAt: Date(timeIntervalSince1970: 1_900_000_000 + Double(i)))
            try await challenges.insert(c)
            issued.append(c.challenge)
        }
        var kept: [[UInt8]] = []
        for challenge in issued where try await challenges.pending(challenge: challenge) != nil { kept.append(challenge) }
        try expect(kept == Array(issued.suffix(PendingCeremony.maxPerBinding)))
        // Another binding, and unbound ceremonies, are not affected.
        let other = try ceremony(binding: SecureRandom.bytes(32))
        try await challenges.insert(other)
        let unbound = try ceremony(binding: nil)
        try await challenges.insert(unbound)
        try expect(try await challenges.pending(challenge: other.challenge) != nil)
        // Expired ones go; live ones stay.
        let expired = try ceremony(binding: nil, expiresAt: Date(timeIntervalSince1970: 1_000))
        try await challenges.insert(expired)
        let remaining = try await challenges.sweep(expiredBefore: Date(timeIntervalSince1970: 1_900_000_000 + 5.5))
        try expect(try await challenges.pending(challenge: expired.challenge) == nil)
        try expect(try await challenges.pending(challenge: issued.last!) != nil)
        try expect(try await challenges.pending(challenge: issued[5]) == nil)  // expired at ...005
        // Left: the bound ones expiring at ...006 to ...011 (`other` and `unbound` expired at ...000.5).
        try expect(remaining == 6)
        // Eviction (stores that implement it): the ceremonies that expire first go first.
        let evictable = stores.challenges
        _ = try await evictable.sweep(expiredBefore: .distantFuture)
        var queued: [PendingCeremony] = []
        for i in 0..<5 {
            let c = try ceremony(binding: [UInt8(i), 9], expiresAt: Date(timeIntervalSince1970: 1_950_000_000 + Double(i)))
            try await evictable.insert(c)
            queued.append(c)
        }
        let evicted = try await evictable.evictOldest(2)
        if evicted > 0 {
            try expect(evicted == 2, "evicted \(evicted), asked for 2")
            for c in queued.prefix(2) { try expect(try await evictable.pending(challenge: c.challenge) == nil, "an early ceremony was kept") }
            for c in queued.suffix(3) { try expect(try await evictable.pending(challenge: c.challenge) != nil, "a later ceremony was evicted") }
            try expect(try await evictable.evictOldest(10) == 3)
        }
    }

}
