internal import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The contract checks of the sign-in's combined store operations: the lookups that read what one
// ceremony step needs at once, the session replacement, and the sign-in commit that stores the
// session in its own transaction. Every store has them (the protocols give defaults made of the
// single operations); SQL stores do each in one statement.
extension StoreContract {
    static func signedIn(_ user: [UInt8], at offset: Double = 0) -> SignedInSession {
        SignedInSession(
            idHash: SecureRandom.bytes(32), userHandle: user, createdAt: Date(timeIntervalSince1970: 1_800_000_000 + offset),
            authenticatedAt: Date(timeIntervalSince1970: 1_800_000_000 + offset), expiresAt: Date(timeIntervalSince1970: 1_900_000_000))
    }

    static func sessionReplaceCheck(_ stores: Stores) async throws {
        let sessions = stores.sessions
        let user = SecureRandom.bytes(32), other = SecureRandom.bytes(32)
        let first = signedIn(user)
        try await sessions.replace(nil, with: first)
        try expect(try await sessions.session(idHash: first.idHash) == first, "a replacement of nothing stores the session")
        let bystander = signedIn(user, at: 1)
        try await sessions.insert(bystander)
        // Signing in as another account from the same browser: the old session ends, whoever's it was.
        let second = signedIn(other, at: 2)
        try await sessions.replace(first.idHash, with: second)
        try expect(try await sessions.session(idHash: first.idHash) == nil, "the replaced session ends")
        try expect(try await sessions.session(idHash: second.idHash) == second, "the new session is stored, field for field")
        try expect(try await sessions.session(idHash: bystander.idHash) == bystander, "the account's other sessions stay")
        // Replacing an unknown session stores the new one all the same.
        let third = signedIn(user, at: 3)
        try await sessions.replace(SecureRandom.bytes(32), with: third)
        try expect(try await sessions.session(idHash: third.idHash) == third)
        // At the limit: a replacement keeps the account's newest maxPerUser, the replaced one not among them.
        var made = [bystander, third]
        for i in 0..<(SignedInSession.maxPerUser + 2) {
            let s = signedIn(user, at: 10 + Double(i))
            try await sessions.insert(s)
            made.append(s)
        }
        let newest = signedIn(user, at: 100)
        let replaced = made.removeLast()
        try await sessions.replace(replaced.idHash, with: newest)
        try expect(try await sessions.session(idHash: replaced.idHash) == nil, "the replaced session ends at the limit too")
        var kept = 0
        for s in made + [newest] where try await sessions.session(idHash: s.idHash) != nil { kept += 1 }
        try expect(kept == SignedInSession.maxPerUser, "\(kept) sessions kept, not \(SignedInSession.maxPerUser)")
        try expect(try await sessions.session(idHash: newest.idHash) == newest, "the newest session is kept")
    }

    static func signInWithSessionCheck(_ stores: Stores) async throws {
        guard let store = stores.challenges as? any SignInCommitting, (stores.challenges as AnyObject) === (stores.credentials as AnyObject),
            (stores.sessions as AnyObject) === (stores.challenges as AnyObject)
        else {
            return  // the engine commits, then replaces the session: the signInCommit and sessionReplace checks cover it
        }
        let sessions = stores.sessions
        var r = try record(count: 5)
        try await store.insert(r)
        let old = signedIn(r.userHandle)
        try await sessions.insert(old)
        func pending() async throws -> PendingCeremony {
            let c = try ceremony(binding: nil)
            try await store.insert(c)
            return c
        }
        // Read together: the ceremony and the credential, either, or neither.
        let first = try await pending()
        let both = try await store.pending(challenge: first.challenge, credentialId: r.id)
        try expect(both.ceremony?.challenge == first.challenge && same(both.credential, r), "both read back, the credential field for field")
        let ceremonyOnly = try await store.pending(challenge: first.challenge, credentialId: SecureRandom.bytes(16))
        try expect(ceremonyOnly.ceremony?.challenge == first.challenge && ceremonyOnly.credential == nil, "an unknown credential reads as nil")
        let credentialOnly = try await store.pending(challenge: SecureRandom.bytes(32), credentialId: r.id)
        try expect(credentialOnly.ceremony == nil && credentialOnly.credential?.id == r.id, "an unknown challenge reads as nil")
        let neither = try await store.pending(challenge: SecureRandom.bytes(32), credentialId: SecureRandom.bytes(16))
        try expect(neither.ceremony == nil && neither.credential == nil)
        try expect(try await store.pending(challenge: first.challenge) != nil, "reading consumes nothing")
        // Committed: the counter, the challenge and the session change, together.
        r.signCount = 6
        let new = signedIn(r.userHandle, at: 1)
        try expect(
            try await store.commitSignIn(consuming: first.challenge, updating: r, expectedSignCount: 5, signingIn: new, replacing: old.idHash) == .committed)
        try expect(try await store.credential(id: r.id)?.signCount == 6, "the counter is written")
        try expect(try await store.pending(challenge: first.challenge) == nil, "the challenge is consumed")
        try expect(try await sessions.session(idHash: new.idHash) == new, "the new session is stored")
        try expect(try await sessions.session(idHash: old.idHash) == nil, "the old session ends")
        // The challenge gone: nothing changes, no session.
        let late = signedIn(r.userHandle, at: 2)
        r.signCount = 7
        try expect(
            try await store.commitSignIn(consuming: first.challenge, updating: r, expectedSignCount: 6, signingIn: late, replacing: new.idHash)
                == .challengeGone)
        try expect(try await sessions.session(idHash: late.idHash) == nil, "a commit without its challenge stores no session")
        try expect(try await sessions.session(idHash: new.idHash) == new, "and ends none")
        try expect(try await store.credential(id: r.id)?.signCount == 6)
        // A stale counter: the challenge is spent, nothing else changes, no session.
        let stale = try await pending()
        try expect(
            try await store.commitSignIn(consuming: stale.challenge, updating: r, expectedSignCount: 5, signingIn: late, replacing: new.idHash)
                == .counterChanged)
        try expect(try await store.pending(challenge: stale.challenge) == nil, "a stale counter spends the challenge")
        try expect(try await sessions.session(idHash: late.idHash) == nil, "a stale counter stores no session")
        try expect(try await sessions.session(idHash: new.idHash) == new, "and ends none")
        // Concurrent commits of one challenge, each with its own session: one commits, one session is stored.
        let raced = try await pending()
        let candidate = r
        let user = r.userHandle
        let outcomes = await withTaskGroup(of: (SignInCommit?, SignedInSession).self) { group in
            for i in 0..<8 {
                group.addTask {
                    let s = signedIn(user, at: 10 + Double(i))
                    return (
                        try? await store.commitSignIn(consuming: raced.challenge, updating: candidate, expectedSignCount: 6, signingIn: s, replacing: nil), s
                    )
                }
            }
            return await group.reduce(into: [(SignInCommit?, SignedInSession)]()) { $0.append($1) }
        }
        try expect(outcomes.filter { $0.0 == .committed }.count == 1, "\(outcomes.map(\.0))")
        for (outcome, session) in outcomes {
            try expect((try await sessions.session(idHash: session.idHash) != nil) == (outcome == .committed), "only the committed sign-in's session")
        }
    }

    static func registrationCommitCheck(_ stores: Stores) async throws {
        guard let store = stores.challenges as? any SignInCommitting, (stores.challenges as AnyObject) === (stores.credentials as AnyObject),
            (stores.sessions as AnyObject) === (stores.challenges as AnyObject), (stores.accounts as AnyObject) === (stores.challenges as AnyObject)
        else {
            return  // the engine consumes, then stores, then replaces the session: the other checks cover it
        }
        let sessions = stores.sessions
        func pending() async throws -> PendingCeremony {
            let c = try ceremony(binding: nil)
            try await store.insert(c)
            return c
        }
        // A new account with its first credential and a session, in place of the browser's old one.
        let june = UserEntity.new(name: "june")
        let first = try record(user: june.id)
        let old = signedIn(SecureRandom.bytes(32))
        try await sessions.insert(old)
        let new = signedIn(june.id, at: 1)
        let c1 = try await pending()
        try expect(try await store.commitRegistration(consuming: c1.challenge, creating: june, credential: first, signingIn: new, replacing: old.idHash))
        try expect(try await stores.accounts.account(named: "june")?.id == june.id, "the account is created")
        try expect(same(try await store.credential(id: first.id), first), "the credential is stored, field for field")
        try expect(try await store.pending(challenge: c1.challenge) == nil, "the challenge is consumed")
        try expect(try await sessions.session(idHash: new.idHash) == new, "the session stored")
        try expect(try await sessions.session(idHash: old.idHash) == nil, "the old session ended")
        // The challenge gone: nothing is stored.
        let late = try record(user: june.id)
        try expect(
            !(try await store.commitRegistration(consuming: c1.challenge, creating: nil, credential: late, signingIn: signedIn(june.id), replacing: nil)))
        try expect(try await store.credential(id: late.id) == nil, "no challenge, no credential")
        // A second credential for the account, without a session.
        let second = try record(user: june.id)
        let c2 = try await pending()
        try expect(try await store.commitRegistration(consuming: c2.challenge, creating: nil, credential: second, signingIn: nil, replacing: nil))
        try expect(try await store.credentials(forUser: june.id).count == 2)
        // A taken credential ID, or a taken name: refused, and nothing changes (the challenge stays, no session).
        let c3 = try await pending()
        let refused = signedIn(june.id, at: 2)
        try expect(
            await errorCode {
                _ = try await store.commitRegistration(
                    consuming: c3.challenge, creating: nil, credential: try record(first.id, user: june.id), signingIn: refused, replacing: new.idHash)
            } == "credential_already_registered")
        let kim = UserEntity.new(name: "JUNE")
        try expect(
            await errorCode {
                _ = try await store.commitRegistration(
                    consuming: c3.challenge, creating: kim, credential: try record(user: kim.id), signingIn: refused, replacing: new.idHash)
            } == "username_unavailable")
        try expect(try await store.pending(challenge: c3.challenge) != nil, "a refused registration leaves its challenge")
        try expect(try await sessions.session(idHash: refused.idHash) == nil, "and stores no session")
        try expect(try await sessions.session(idHash: new.idHash) == new, "and ends none")
        try expect(try await stores.accounts.account(handle: kim.id) == nil, "and creates no account")
        // A credential added to an existing account: stored with the session while the account exists...
        let third = try record(user: june.id)
        let c4 = try await pending()
        let added = signedIn(june.id, at: 3)
        try expect(
            try await store.commitRegistration(
                consuming: c4.challenge, addingTo: june.id, limit: 32, credential: third, signingIn: added, replacing: new.idHash))
        try expect(same(try await store.credential(id: third.id), third), "a credential added to an existing account is stored")
        try expect(try await sessions.session(idHash: added.idHash) == added, "with its session")
        // ...and refused once it was deleted (account_unknown): nothing changes, no credential of no account.
        try expect(try await stores.accounts.deleteAccount(handle: june.id))
        let c5 = try await pending()
        let orphan = try record(user: june.id), after = signedIn(june.id, at: 4)
        try expect(
            await errorCode {
                _ = try await store.commitRegistration(
                    consuming: c5.challenge, addingTo: june.id, limit: 32, credential: orphan, signingIn: after, replacing: nil)
            } == "account_unknown")
        try expect(try await store.credential(id: orphan.id) == nil, "no credential for a deleted account")
        try expect(try await sessions.session(idHash: after.idHash) == nil, "and no session")
        try expect(try await store.pending(challenge: c5.challenge) != nil, "and the challenge stays")
    }

    static func accountWithCredentialsCheck(_ stores: Stores) async throws {
        let accounts = stores.accounts, credentials = stores.credentials
        try expect(try await accounts.account(named: "hana", withCredentialsIn: credentials) == nil, "no account, nothing")
        let hana = UserEntity.new(name: "hana")
        let first = try record(user: hana.id)
        try await accounts.create(hana, firstCredential: first)
        let second = try record(user: hana.id, createdAt: first.createdAt.addingTimeInterval(60))
        try await credentials.insert(second)
        try await credentials.insert(try record(user: SecureRandom.bytes(32)))
        let found = try require(try await accounts.account(named: "HANA", withCredentialsIn: credentials), "the account, by its look-alike key")
        try expect(found.account.id == hana.id && found.account.name == "hana", "the account")
        try expect(found.credentials.map(\.id) == [first.id, second.id], "its credentials, oldest first, and no one else's")
        let yulia = UserEntity.new(name: "юлия")
        let hers = try record(user: yulia.id)
        try await accounts.create(yulia, firstCredential: hers)
        let byCapitals = try require(try await accounts.account(named: "Юлия", withCredentialsIn: credentials), "the account, by its capitals key")
        try expect(byCapitals.account.id == yulia.id && byCapitals.credentials.map(\.id) == [hers.id], "юлия from Юлия")
        try expect(same(found.credentials.first, first), "each credential field for field")
        // An account without a credential (made with an identity) reads with none.
        let ivy = UserEntity.new(name: "ivy")
        try await stores.identities.create(ivy, firstIdentity: identity("ivy.sub", user: ivy.id))
        let bare = try require(try await accounts.account(named: "ivy", withCredentialsIn: credentials), "the account made with an identity")
        try expect(bare.account.id == ivy.id && bare.credentials.isEmpty)
    }
}
