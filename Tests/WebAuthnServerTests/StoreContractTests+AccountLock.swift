import Foundation
import Testing
@testable import WebAuthnCore
@testable import WebAuthnPostgres
import _WebAuthnEncoding
import _WebAuthnCrypto

/// PostgreSQL: the writes that give an account a way in (a sign-in's or a re-authentication's
/// new session, Sign in with Apple's, an Apple ID's link) lock the account's row first, as its
/// deletion and the ending of its sessions do, so that the two cannot each miss the other (red
/// team, twelfth pass, several processes on one database).
extension StoreContractTests {
    /// The store under test, a second connection into its schema, and a monitor of lock waits.
    static func lockingSetup(_ name: String) async throws -> (store: PostgresStore, holder: PostgresPool, monitor: PostgresPool, application: String) {
        let url = try #require(Self.postgresURL)
        let application = name + "_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await Self.postgresStore(url, application: application, connections: 2)
        let schema = try #require(try await store.pool.query("SELECT current_schema() AS s").first?["s"])
        return (store, try PostgresPool(url: url + "?options=-c%20search_path%3D\(schema)", size: 1), try PostgresPool(url: url, size: 1), application)
    }

    static func session(_ user: [UInt8]) -> SignedInSession {
        SignedInSession(
            idHash: SecureRandom.bytes(32), userHandle: user, createdAt: Date(), authenticatedAt: Date(), expiresAt: Date().addingTimeInterval(3600))
    }

    @Test(
        "postgres: a sign-in's or a re-authentication's new session, and Sign in with Apple's, wait for the account's lock, so sign-out everywhere ends them",
        .enabled(if: StoreContractTests.postgresURL != nil))
    func postgresSessionWritesLockTheAccount() async throws {
        // Red team, twelfth pass: a re-authentication committed beside sign-out everywhere on
        // another process; the ending's snapshot did not see the new session, which stayed signed
        // in and verified while the answer said the sessions had ended (3 rounds in 30).
        let (store, holder, monitor, application) = try await Self.lockingSetup("signin")
        let dana = UserEntity.new(name: "dana")
        var passkey = try Self.record(user: dana.id, count: 1)
        try await store.create(dana, firstCredential: passkey)
        let old = Self.session(dana.id)
        try await store.insert(old)
        let ceremony = try Self.ceremony(binding: old.idHash)
        try await store.insert(ceremony)
        passkey.signCount = 2
        let updated = passkey
        // The account is held, as the ending of its sessions holds it while it deletes them.
        _ = try await holder.query("BEGIN")
        _ = try await holder.query("SELECT webauthn_lock_account($1)", [PGText.bytea(dana.id)])
        let renewed = Self.session(dana.id)
        let signIn = Task {
            try await store.commitSignIn(consuming: ceremony.challenge, updating: updated, expectedSignCount: 1, signingIn: renewed, replacing: old.idHash)
        }
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the sign-in's commit waits for the account")
        _ = try await holder.query("COMMIT")
        #expect(try await signIn.value == .committed)
        #expect(try await store.session(idHash: renewed.idHash) != nil)
        #expect(try await store.session(idHash: old.idHash) == nil)
        // Sign in with Apple's replacement, the same.
        _ = try await holder.query("BEGIN")
        _ = try await holder.query("SELECT webauthn_lock_account($1)", [PGText.bytea(dana.id)])
        let apple = Self.session(dana.id)
        let replacement = Task { try await store.replace(renewed.idHash, with: apple) }
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the replacement waits for the account")
        _ = try await holder.query("COMMIT")
        try await replacement.value
        #expect(try await store.session(idHash: apple.idHash) != nil)
        #expect(try await store.session(idHash: renewed.idHash) == nil)
        // A sign-in without a session to store takes no such lock.
        let plain = try Self.ceremony(binding: nil)
        try await store.insert(plain)
        passkey.signCount = 3
        _ = try await holder.query("BEGIN")
        _ = try await holder.query("SELECT webauthn_lock_account($1)", [PGText.bytea(dana.id)])
        #expect(try await store.commitSignIn(consuming: plain.challenge, updating: passkey, expectedSignCount: 2) == .committed)
        _ = try await holder.query("COMMIT")
        for pool in [holder, monitor] { await pool.close() }
        await store.close()
    }

    @Test(
        "postgres: an Apple ID linked beside the account's deletion does not outlive it, whichever commits first",
        .enabled(if: StoreContractTests.postgresURL != nil))
    func postgresLinkBesideDeletion() async throws {
        // Red team, twelfth pass: the link read the account without a lock; 7 rounds in 60 left an
        // identity (with its refresh token) of a deleted account, which signed in to it for good.
        let (store, holder, monitor, application) = try await Self.lockingSetup("link")
        // The deletion first: the link waits for it, then finds no account.
        let dana = UserEntity.new(name: "dana")
        try await store.create(dana, firstCredential: try Self.record(user: dana.id))
        _ = try await holder.query("BEGIN")
        _ = try await holder.query("DELETE FROM accounts WHERE handle = $1", [PGText.bytea(dana.id)])
        let link = Task { try await store.link(LinkedIdentity(provider: "apple", subject: "001.dana", userHandle: dana.id, createdAt: Date())) }
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the link waits for the deletion")
        _ = try await holder.query("COMMIT")
        await #expect(throws: WebAuthnError.self) { try await link.value }
        #expect(try await store.identity(provider: "apple", subject: "001.dana") == nil)
        // The link first (held open as the store's statement holds it): the deletion waits, and its
        // last statement removes the identity its first one could not see.
        let erin = UserEntity.new(name: "erin")
        try await store.create(erin, firstCredential: try Self.record(user: erin.id))
        _ = try await holder.query("BEGIN")
        _ = try await holder.query(
            """
            WITH owner AS (SELECT handle FROM accounts WHERE handle = $1 FOR SHARE)
            INSERT INTO identities (provider, subject, user_handle, refresh_token, created_at, updated_at)
            SELECT 'apple', '002.erin', handle, '\\x0909'::bytea, 0, 0 FROM owner
            """, [PGText.bytea(erin.id)])
        let deletion = Task { try await store.deleteAccount(handle: erin.id, reportingIdentitiesIn: store) }
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the deletion waits for the link")
        _ = try await holder.query("COMMIT")
        // Reported with its refresh token, which the server then revokes (its first pass read none).
        let reported = try #require(try await deletion.value)
        #expect(reported.map(\.subject) == ["002.erin"] && reported.first?.refreshToken == [9, 9], "\(reported)")
        #expect(try await store.identity(provider: "apple", subject: "002.erin") == nil, "no identity of a deleted account")
        for pool in [holder, monitor] { await pool.close() }
        await store.close()
    }
}
