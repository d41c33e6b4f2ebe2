internal import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The contract checks of account, session and linked-identity stores.
extension StoreContract {
    static func identity(_ subject: String, user: [UInt8], email: String? = "a@privaterelay.appleid.com") -> LinkedIdentity {
        LinkedIdentity(
            provider: "apple", subject: subject, userHandle: user, email: email, emailVerified: true, isPrivateEmail: true, emailEnabled: false,
            emailChangedAt: Date(timeIntervalSince1970: 1_799_999_000.25), refreshToken: [1, 2, 3], createdAt: Date(timeIntervalSince1970: 1_800_000_000))
    }

    static func identitiesCheck(_ stores: Stores) async throws {
        let identities = stores.identities
        let dana = UserEntity.new(name: "dana")
        let first = identity("001234.abc", user: dana.id)
        try await identities.create(dana, firstIdentity: first)
        try expect(try await stores.accounts.account(named: "dana")?.id == dana.id, "the account exists with its identity")
        try expect(try await identities.identity(provider: "apple", subject: "001234.abc") == first, "the identity reads back field for field")
        try expect(try await identities.identity(provider: "apple", subject: "001234.ABC") == nil, "subjects are case-sensitive")
        try expect(try await identities.identity(provider: "google", subject: "001234.abc") == nil, "the provider is part of the key")
        // A NUL is part of the text, never its end (red team: SQLite bound text as a C string, and
        // `001234.abc\0evil` found, unlinked and signed in to this identity). A store that cannot hold
        // a NUL (PostgreSQL) may refuse it; none may take it for another subject or name.
        let cut = "001234.abc\u{0}evil"
        try expect(((try? await identities.identity(provider: "apple", subject: cut)) ?? nil) == nil, "a subject with a NUL is not the subject before it")
        try expect(((try? await identities.unlink(provider: "apple", subject: cut)) ?? nil) == nil, "nothing unlinked through a NUL")
        try expect(!((try? await identities.relink(provider: "apple", subject: cut, to: "666.nul", at: Date())) ?? false), "nothing relinked through a NUL")
        try expect(try await identities.identity(provider: "apple", subject: "001234.abc") == first, "the identity is untouched")
        try expect(((try? await stores.accounts.account(named: "dana\u{0}x")) ?? nil) == nil, "a name with a NUL is not the name before it")
        // The same subject again, for a new name: nothing is created.
        let eve = UserEntity.new(name: "eve")
        try expect(await errorCode { try await identities.create(eve, firstIdentity: identity("001234.abc", user: eve.id)) } == "identity_already_linked")
        try expect(try await stores.accounts.account(named: "eve") == nil, "no account without its identity")
        // A taken name: nothing is created either.
        let dana2 = UserEntity.new(name: "DANA")
        try expect(await errorCode { try await identities.create(dana2, firstIdentity: identity("999.x", user: dana2.id)) } == "username_unavailable")
        try expect(try await identities.identity(provider: "apple", subject: "999.x") == nil, "no identity without its account")
        let gleb = UserEntity.new(name: "глеб")
        try await identities.create(gleb, firstIdentity: identity("010.gleb", user: gleb.id))
        let capitalGleb = UserEntity.new(name: "Глеб")
        try expect(
            await errorCode { try await identities.create(capitalGleb, firstIdentity: identity("011.gleb", user: capitalGleb.id)) } == "username_unavailable",
            "a name taken in another case (its capitals key)")
        // Link a second identity to the existing account; not to an unknown one, not twice.
        try await identities.link(identity("002.def", user: dana.id, email: nil))
        try expect(await errorCode { try await identities.link(identity("003.ghi", user: [9, 9, 9])) } == "account_unknown")
        try expect(await errorCode { try await identities.link(identity("002.def", user: dana.id)) } == "identity_already_linked")
        try expect(try await identities.identities(forUser: dana.id).map(\.subject).sorted() == ["001234.abc", "002.def"], "both identities listed")
        try expect(await errorCode { try await identities.link(identity("", user: dana.id)) } == "identity_invalid")
        // A NUL in the email failed the PostgreSQL store with an internal error (red team, fourteenth pass).
        try expect(await errorCode { try await identities.link(identity("004.nul", user: dana.id, email: "a\u{0}@example.com")) } == "identity_invalid")
        // Update the mutable fields.
        var changed = first
        changed.email = "new@example.com"
        changed.emailVerified = false
        changed.emailEnabled = true
        changed.emailChangedAt = Date(timeIntervalSince1970: 1_800_000_050.5)
        changed.refreshToken = nil
        changed.updatedAt = Date(timeIntervalSince1970: 1_800_000_100)
        try expect(try await identities.update(changed), "update finds the identity")
        let back = try require(try await identities.identity(provider: "apple", subject: "001234.abc"), "the updated identity")
        try expect(
            back.email == "new@example.com" && back.emailVerified == false && back.refreshToken == nil && back.updatedAt == changed.updatedAt
                && back.emailEnabled == true && back.emailChangedAt == changed.emailChangedAt,
            "updated fields read back")
        try expect(back.createdAt == first.createdAt && back.userHandle == dana.id, "the link itself does not change")
        try expect(!(try await identities.update(identity("nobody", user: dana.id))), "update of an unknown identity is false")
        // The compare-and-set update: only over the refresh token it names; of writers racing from
        // one token, exactly one.
        var tokened = back
        tokened.refreshToken = [1]
        try expect(!(try await identities.update(tokened, ifRefreshTokenIs: [9])), "a compare-and-set over another token is false")
        try expect(try await identities.identity(provider: "apple", subject: "001234.abc")?.refreshToken == nil, "and changes nothing")
        try expect(try await identities.update(tokened, ifRefreshTokenIs: nil), "a compare-and-set over the stored (absent) token")
        let racing = try await withThrowingTaskGroup(of: Bool.self) { group in
            for n in 2..<10 {
                var next = tokened
                next.refreshToken = [UInt8(n)]
                group.addTask { try await identities.update(next, ifRefreshTokenIs: [1]) }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let stored = try await identities.identity(provider: "apple", subject: "001234.abc")?.refreshToken
        try expect(racing == 1 && stored != [1] && stored != nil, "one of 8 racing compare-and-sets wins (\(racing))")
        try expect(!(try await identities.update(identity("nobody", user: dana.id), ifRefreshTokenIs: nil)), "nor an unknown identity")
        // The conditional unlink: only over the refresh token it names; against a racing
        // compare-and-set update from the same token, never both.
        try expect(try await identities.unlink(provider: "apple", subject: "001234.abc", ifRefreshTokenIs: [200]) == nil, "an unlink over another token")
        try expect(try await identities.identity(provider: "apple", subject: "001234.abc") != nil, "leaves the link")
        for round in 0..<5 {
            var held = identity("005.cas\(round)", user: dana.id)
            held.refreshToken = [7]
            try await identities.link(held)
            var next = held
            next.refreshToken = [8]
            async let updated = identities.update(next, ifRefreshTokenIs: [7])
            let subject = held.subject
            async let unlinked = identities.unlink(provider: "apple", subject: subject, ifRefreshTokenIs: [7])
            let (u, removed) = try await (updated, unlinked)
            try expect(u != (removed != nil), "exactly one of a racing update and unlink from one token (round \(round): \(u), \(removed != nil))")
            _ = try await identities.unlink(provider: "apple", subject: subject)
        }
        // Relink (a team transfer): same account, new subject; never onto a taken subject.
        try expect(
            try await identities.relink(provider: "apple", subject: "002.def", to: "777.new", at: Date(timeIntervalSince1970: 1_800_000_200)), "relinked")
        try expect(try await identities.identity(provider: "apple", subject: "002.def") == nil, "the old subject is gone")
        try expect(try await identities.identity(provider: "apple", subject: "777.new")?.userHandle == dana.id, "the new subject signs in to the account")
        let moved = try await identities.identity(provider: "apple", subject: "777.new")
        try expect(
            moved?.emailEnabled == false && moved?.emailChangedAt == Date(timeIntervalSince1970: 1_799_999_000.25), "the email fields move with the link")
        try expect(
            await errorCode { _ = try await identities.relink(provider: "apple", subject: "777.new", to: "001234.abc", at: Date()) }
                == "identity_already_linked")
        try expect(!(try await identities.relink(provider: "apple", subject: "nobody", to: "x", at: Date())), "relink of an unknown subject is false")
        // Unlink returns what it removed, once.
        try expect(try await identities.unlink(provider: "apple", subject: "777.new")?.userHandle == dana.id, "unlink returns the link")
        try expect(try await identities.unlink(provider: "apple", subject: "777.new") == nil, "a second unlink finds nothing")
        try expect(try await stores.accounts.account(handle: dana.id) != nil, "unlinking keeps the account")
    }

    static func accountDeletionCheck(_ stores: Stores) async throws {
        let frank = UserEntity.new(name: "frank"), gina = UserEntity.new(name: "gina")
        let frankKey = try record(user: frank.id), ginaKey = try record(user: gina.id)
        try await stores.accounts.create(frank, firstCredential: frankKey)
        try await stores.accounts.create(gina, firstCredential: ginaKey)
        let second = try record(user: frank.id)
        try await stores.credentials.insert(second)
        try await stores.identities.link(identity("frank.sub", user: frank.id))
        let session = SignedInSession(
            idHash: SecureRandom.bytes(32), userHandle: frank.id, createdAt: Date(timeIntervalSince1970: 1_800_000_000),
            authenticatedAt: Date(timeIntervalSince1970: 1_800_000_000), expiresAt: Date(timeIntervalSince1970: 1_900_000_000))
        try await stores.sessions.insert(session)
        // A store that keeps accounts, sessions and ceremonies together drops the ceremonies pending
        // under the account's sessions with it: a registration started there cannot finish after.
        let together =
            (stores.challenges as AnyObject) === (stores.accounts as AnyObject) && (stores.sessions as AnyObject) === (stores.accounts as AnyObject)
        let started = try ceremony(binding: session.idHash), unrelated = try ceremony(binding: SecureRandom.bytes(32))
        if together {
            try await stores.challenges.insert(started)
            try await stores.challenges.insert(unrelated)
        }
        try expect(try await stores.accounts.deleteAccount(handle: frank.id), "the account is deleted")
        if together {
            try expect(try await stores.challenges.pending(challenge: started.challenge) == nil, "a ceremony its session started is gone")
            try expect(try await stores.challenges.pending(challenge: unrelated.challenge) != nil, "another session's ceremony stays")
        }
        _ = try await stores.sessions.deleteSessions(userHandle: frank.id)
        try expect(try await stores.accounts.account(handle: frank.id) == nil, "the account is gone")
        try expect(try await stores.accounts.account(named: "frank") == nil, "its name is gone")
        try expect(try await stores.credentials.credential(id: frankKey.id) == nil, "its first credential is gone")
        try expect(try await stores.credentials.credential(id: second.id) == nil, "its second credential is gone")
        try expect(try await stores.identities.identity(provider: "apple", subject: "frank.sub") == nil, "its identity is gone")
        try expect(try await stores.sessions.session(idHash: session.idHash) == nil, "its sessions are gone")
        try expect(!(try await stores.accounts.deleteAccount(handle: frank.id)), "a second delete finds nothing")
        try expect(try await stores.accounts.account(handle: gina.id) != nil, "another account is untouched")
        try expect(try await stores.credentials.credential(id: ginaKey.id) != nil, "another account's credential is untouched")
        // The name is free again.
        let frank2 = UserEntity.new(name: "Frank")
        try await stores.accounts.create(frank2, firstCredential: try record(user: frank2.id))
        // A deletion that reports the identities it removed, refresh tokens included, oldest first
        // (the server revokes their tokens at the provider).
        var older = identity("frank2.a", user: frank2.id)
        older.refreshToken = [4, 4]
        let newer = LinkedIdentity(
            provider: "apple", subject: "frank2.b", userHandle: frank2.id, refreshToken: [5, 5], createdAt: older.createdAt.addingTimeInterval(1))
        try await stores.identities.link(newer)
        try await stores.identities.link(older)
        try await stores.identities.link(identity("gina.sub", user: gina.id))
        let reported = try await stores.accounts.deleteAccount(handle: frank2.id, reportingIdentitiesIn: stores.identities)
        try expect(
            reported?.map(\.subject) == ["frank2.a", "frank2.b"], "the deletion reports the account's identities, oldest first: \(String(describing: reported))"
        )
        try expect(reported?.map(\.refreshToken) == [[4, 4], [5, 5]], "with their refresh tokens")
        try expect(try await stores.accounts.account(handle: frank2.id) == nil, "the reporting deletion deletes the account")
        try expect(try await stores.identities.identity(provider: "apple", subject: "frank2.b") == nil, "and its identities")
        try expect(try await stores.identities.identity(provider: "apple", subject: "gina.sub") != nil, "another account's identity stays")
        try expect(try await stores.accounts.deleteAccount(handle: frank2.id, reportingIdentitiesIn: stores.identities) == nil, "a second finds nothing")
    }

    static func lastWayInCheck(_ stores: Stores) async throws {
        guard let guarding = stores.accounts as? any AccountWayInGuarding, (stores.accounts as AnyObject) === (stores.credentials as AnyObject) else {
            return  // the server counts, then deletes, one deletion at a time per account in its process
        }
        let olga = UserEntity.new(name: "olga"), pia = UserEntity.new(name: "pia")
        let first = try record(user: olga.id), second = try record(user: olga.id), hers = try record(user: pia.id)
        try await stores.accounts.create(olga, firstCredential: first)
        try await stores.accounts.create(pia, firstCredential: hers)
        try expect(try await guarding.deleteCredential(id: first.id, ofAccount: olga.id) == .lastWayIn, "the only credential stays")
        try expect(try await stores.credentials.credential(id: first.id) != nil)
        try expect(try await guarding.deleteCredential(id: hers.id, ofAccount: olga.id) == .notFound, "another account's credential is not found")
        try expect(try await stores.credentials.credential(id: hers.id) != nil)
        try await stores.credentials.insert(second)
        try expect(try await guarding.deleteCredential(id: first.id, ofAccount: olga.id) == .deleted, "one of two goes")
        try expect(try await guarding.deleteCredential(id: second.id, ofAccount: olga.id) == .lastWayIn, "the last one stays")
        try expect(try await guarding.deleteCredential(id: first.id, ofAccount: olga.id) == .notFound, "a deleted one is not found")
        // A linked identity is a way in: the last credential may go.
        try await stores.identities.link(identity("olga.sub", user: olga.id))
        try expect(try await guarding.deleteCredential(id: second.id, ofAccount: olga.id) == .deleted, "with an identity, the last credential may go")
        // Sixteen deletions of an account's last two at once: exactly one goes.
        let quinn = UserEntity.new(name: "quinn")
        let a = try record(user: quinn.id), b = try record(user: quinn.id)
        try await stores.accounts.create(quinn, firstCredential: a)
        try await stores.credentials.insert(b)
        let outcomes = try await withThrowingTaskGroup(of: CredentialDeletion.self) { group in
            for id in Array(repeating: [a.id, b.id], count: 8).joined() { group.addTask { try await guarding.deleteCredential(id: id, ofAccount: quinn.id) } }
            return try await group.reduce(into: [CredentialDeletion]()) { $0.append($1) }
        }
        try expect(outcomes.filter { $0 == .deleted }.count == 1, "exactly one deletion of the last two passes: \(outcomes)")
        try expect(try await stores.credentials.credentials(forUser: quinn.id).count == 1, "one way in is left")
        guard (stores.identities as AnyObject) === (stores.accounts as AnyObject) else { return }
        // The owner unlinking an identity: the same rule, and its refresh token answered (to revoke).
        var linked = identity("quinn.sub", user: quinn.id)
        linked.refreshToken = [8, 8]
        try await stores.identities.link(linked)
        try expect(try await guarding.unlinkIdentity(provider: "apple", subject: "olga.sub", ofAccount: quinn.id) == (.notFound, nil), "another's identity")
        try expect(try await guarding.unlinkIdentity(provider: "apple", subject: "quinn.sub", ofAccount: quinn.id) == (.deleted, [8, 8]), "with a credential")
        try expect(try await stores.identities.identity(provider: "apple", subject: "quinn.sub") == nil, "unlinked")
        try expect(try await guarding.unlinkIdentity(provider: "apple", subject: "olga.sub", ofAccount: olga.id) == (.lastWayIn, nil), "the last way in stays")
        try expect(try await stores.identities.identity(provider: "apple", subject: "olga.sub") != nil)
        // An identity unlinked and the last credential deleted at once, eight times each: one goes.
        for round in 0..<4 {
            let owner = UserEntity.new(name: "race\(round)")
            let key = try record(user: owner.id)
            try await stores.accounts.create(owner, firstCredential: key)
            try await stores.identities.link(identity("race\(round).sub", user: owner.id))
            let results = try await withThrowingTaskGroup(of: CredentialDeletion.self) { group in
                for i in 0..<16 {
                    group.addTask {
                        i % 2 == 0
                            ? try await guarding.deleteCredential(id: key.id, ofAccount: owner.id)
                            : try await guarding.unlinkIdentity(provider: "apple", subject: "race\(round).sub", ofAccount: owner.id).0
                    }
                }
                return try await group.reduce(into: [CredentialDeletion]()) { $0.append($1) }
            }
            let left = try await stores.credentials.credentials(forUser: owner.id).count + stores.identities.identities(forUser: owner.id).count
            try expect(results.filter { $0 == .deleted }.count == 1 && left == 1, "exactly one of the last two ways in goes: \(results)")
        }
    }

    static func accountsCheck(_ stores: Stores) async throws {
        let accounts = stores.accounts
        // Sixteen concurrent sign-ups for one name: exactly one account, with its credential.
        let outcomes = await withTaskGroup(of: ([UInt8], [UInt8], Bool).self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let user = UserEntity.new(name: "bob")
                    guard let credential = try? record(user: user.id) else { return (user.id, [], false) }
                    let ok = (try? await accounts.create(user, firstCredential: credential)) != nil
                    return (user.id, credential.id, ok)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let winners = outcomes.filter(\.2)
        try expect(winners.count == 1)
        let winner = try require(winners.first, "a value")
        try expect(try await accounts.account(named: "bob")?.id == winner.0)
        try expect(try await accounts.account(handle: winner.0)?.name == "bob")
        try expect(try await stores.credentials.credential(id: winner.1)?.userHandle == winner.0)
        for loser in outcomes where !loser.2 {
            try expect(try await stores.credentials.credential(id: loser.1) == nil)
            try expect(try await accounts.account(handle: loser.0) == nil)
        }
        // Look-alikes are the same account: case and full-width forms.
        try expect(try await accounts.account(named: "BOB")?.id == winner.0)
        let lookalike = UserEntity.new(name: "ＢＯＢ")
        try expect(await errorCode { try await accounts.create(lookalike, firstCredential: try record(user: lookalike.id)) } == "username_unavailable")
        // Capitals that look unlike their small letters: one account whatever the case (the
        // capitals key), found from either case, and not taken again in the other.
        let boris = UserEntity.new(name: "борис")
        try await accounts.create(boris, firstCredential: try record(user: boris.id))
        for name in ["Борис", "БОРИС", "бОРИС"] {
            try expect(try await accounts.account(named: name)?.id == boris.id, "\(name) finds борис")
            let other = UserEntity.new(name: name)
            try expect(await errorCode { try await accounts.create(other, firstCredential: try record(user: other.id)) } == "username_unavailable", name)
        }
        let capitalBeta = UserEntity.new(name: "Βeta")
        try await accounts.create(capitalBeta, firstCredential: try record(user: capitalBeta.id))
        try expect(try await accounts.account(named: "beta")?.id == capitalBeta.id, "Greek Β is Latin B")
        try expect(try await accounts.account(named: "βeta")?.id == capitalBeta.id, "and Β is β in small letters")
        let smallBeta = UserEntity.new(name: "βeta")
        try expect(await errorCode { try await accounts.create(smallBeta, firstCredential: try record(user: smallBeta.id)) } == "username_unavailable")
        // A credential ID that exists: no account either.
        let carol = UserEntity.new(name: "carol")
        try expect(
            await errorCode { try await accounts.create(carol, firstCredential: try record(winner.1, user: carol.id)) } == "credential_already_registered")
        try expect(try await accounts.account(named: "carol") == nil)
        try expect(try await accounts.account(named: "nobody") == nil)
        // A display name changes; the name (the account's key) does not.
        let dave = UserEntity.new(name: "dave", displayName: "Dave")
        try await accounts.create(dave, firstCredential: try record(user: dave.id))
        try expect(try await accounts.setDisplayName("David Q. ✓", handle: dave.id), "the display name was not changed")
        let renamed = try require(try await accounts.account(handle: dave.id), "dave")
        try expect(renamed.displayName == "David Q. ✓" && renamed.name == "dave", "read back \(renamed.name) / \(renamed.displayName)")
        try expect(try await accounts.account(named: "dave")?.displayName == "David Q. ✓")
        try expect(!(try await accounts.setDisplayName("x", handle: SecureRandom.bytes(32))), "renamed an account that does not exist")
    }

    static func sessionsCheck(_ stores: Stores) async throws {
        let sessions = stores.sessions
        let user = SecureRandom.bytes(32)
        func session(_ i: Int, user: [UInt8], expires: Double = 1_900_000_000) -> SignedInSession {
            SignedInSession(
                idHash: SecureRandom.bytes(32), userHandle: user, createdAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(i)),
                authenticatedAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(i)), expiresAt: Date(timeIntervalSince1970: expires))
        }
        let first = session(0, user: user)
        try await sessions.insert(first)
        try expect(try await sessions.session(idHash: first.idHash) == first)
        try await sessions.delete(idHash: first.idHash)
        try expect(try await sessions.session(idHash: first.idHash) == nil)
        var made: [SignedInSession] = []
        for i in 1...(SignedInSession.maxPerUser + 3) {
            let s = session(i, user: user)
            try await sessions.insert(s)
            made.append(s)
        }
        for (i, s) in made.enumerated() {
            try expect((try await sessions.session(idHash: s.idHash) != nil) == (i >= 3), "session \(i)")
        }
        let old = session(100, user: SecureRandom.bytes(32), expires: 1_000)
        try await sessions.insert(old)
        let remaining = try await sessions.sweepSessions(expiredBefore: Date(timeIntervalSince1970: 1_850_000_000))
        try expect(try await sessions.session(idHash: old.idHash) == nil)
        try expect(remaining == SignedInSession.maxPerUser)
        // Every session of an account but one: the others end, the kept one and other accounts' stay.
        let owner = SecureRandom.bytes(32), other = SecureRandom.bytes(32)
        let (mine, elsewhere, theirs) = (session(1, user: owner), session(2, user: owner), session(3, user: other))
        for s in [mine, elsewhere, theirs] { try await sessions.insert(s) }
        try expect(try await sessions.deleteSessions(userHandle: owner, except: mine.idHash) == 1, "one other session ends")
        try expect(try await sessions.session(idHash: mine.idHash) == mine, "the kept session stays as it was")
        try expect(try await sessions.session(idHash: elsewhere.idHash) == nil, "the other session is gone")
        try expect(try await sessions.session(idHash: theirs.idHash) == theirs, "another account's session stays")
        try expect(try await sessions.deleteSessions(userHandle: owner, except: theirs.idHash) == 1, "a kept hash of another account keeps nothing")
    }

    static func sessionCeremoniesCheck(_ stores: Stores) async throws {
        // Only a store that keeps sessions and ceremonies together can end both at once.
        guard (stores.challenges as AnyObject) === (stores.sessions as AnyObject) else { return }
        let user = SecureRandom.bytes(32)
        func session() -> SignedInSession {
            SignedInSession(
                idHash: SecureRandom.bytes(32), userHandle: user, createdAt: Date(timeIntervalSince1970: 1_800_000_000),
                authenticatedAt: Date(timeIntervalSince1970: 1_800_000_000), expiresAt: Date(timeIntervalSince1970: 1_900_000_000))
        }
        let (a, b, c, d) = (session(), session(), session(), session())
        for s in [a, b, c] { try await stores.sessions.insert(s) }
        func started(under s: SignedInSession) async throws -> PendingCeremony {
            let pending = try ceremony(binding: s.idHash)
            try await stores.challenges.insert(pending)
            return pending
        }
        func kept(_ p: PendingCeremony) async throws -> Bool { try await stores.challenges.pending(challenge: p.challenge) != nil }
        let (underA, underB, underC, elsewhere) = (try await started(under: a), try await started(under: b), try await started(under: c), try ceremony())
        try await stores.challenges.insert(elsewhere)
        try await stores.sessions.delete(idHash: a.idHash)
        try expect(!(try await kept(underA)), "a signed-out session's ceremony is gone")
        try expect(try await kept(underB), "another session's ceremony stays")
        try await stores.sessions.replace(b.idHash, with: d)
        try expect(!(try await kept(underB)), "a replaced session's ceremony is gone")
        let underD = try await started(under: d)
        try expect(try await stores.sessions.deleteSessions(userHandle: user) == 2, "both sessions left end")
        let (keptC, keptD) = (try await kept(underC), try await kept(underD))
        try expect(!keptC && !keptD, "the ceremonies of every session of the account are gone")
        try expect(try await kept(elsewhere), "a ceremony bound to no session of the account stays")
    }
}
