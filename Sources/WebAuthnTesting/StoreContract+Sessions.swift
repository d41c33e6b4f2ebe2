internal import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The contract check of a replacement that stands on the session it replaces
// (`SessionStore.replace(stored:with:)`).
extension StoreContract {
    static func sessionReplaceStoredCheck(_ stores: Stores) async throws {
        let sessions = stores.sessions
        let owner = UserEntity.new(name: "stored"), other = SecureRandom.bytes(32)
        try await stores.accounts.create(owner, firstCredential: try record(user: owner.id))
        let user = owner.id
        // Stored: the old one ends, the new one is kept.
        let old = signedIn(user), new = signedIn(user, at: 1)
        try await sessions.insert(old)
        try expect(try await sessions.replace(stored: old.idHash, with: new), "a stored session is replaced")
        try expect(try await sessions.session(idHash: old.idHash) == nil, "the old one is gone")
        try expect(try await sessions.session(idHash: new.idHash) == new, "the new one is kept")
        // Not stored, or another account's: nothing changes.
        let unknown = signedIn(user, at: 2)
        try expect(!(try await sessions.replace(stored: SecureRandom.bytes(32), with: unknown)), "an unknown session is not replaced")
        try expect(try await sessions.session(idHash: unknown.idHash) == nil, "and nothing is stored")
        let theirs = signedIn(other, at: 3)
        try await sessions.insert(theirs)
        try expect(!(try await sessions.replace(stored: theirs.idHash, with: signedIn(user, at: 4))), "another account's session is not replaced")
        try expect(try await sessions.session(idHash: theirs.idHash) == theirs, "and stays")
        // At the per-account limit, the replaced session being the oldest: replaced all the same.
        _ = try await sessions.deleteSessions(userHandle: user)
        let oldest = signedIn(user, at: 10)
        try await sessions.insert(oldest)
        for i in 1..<SignedInSession.maxPerUser { try await sessions.insert(signedIn(user, at: 10 + Double(i))) }
        let newest = signedIn(user, at: 100)
        try expect(try await sessions.replace(stored: oldest.idHash, with: newest), "the oldest session at the limit is replaced, not dropped first")
        try expect(try await sessions.session(idHash: newest.idHash) == newest)
        // Racing the ending of the account's sessions: whichever comes first, no session is left.
        for round in 0..<12 {
            _ = try await sessions.deleteSessions(userHandle: user)
            let before = signedIn(user, at: 200 + Double(round)), after = signedIn(user, at: 300 + Double(round))
            try await sessions.insert(before)
            async let ended = sessions.deleteSessions(userHandle: user)
            async let replaced = sessions.replace(stored: before.idHash, with: after)
            _ = try await (ended, replaced)
            try expect(try await sessions.session(idHash: after.idHash) == nil, "round \(round): a session stored in place of an ended one survived the ending")
        }
    }
}
