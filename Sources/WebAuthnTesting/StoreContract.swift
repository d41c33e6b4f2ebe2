public import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// The contract every store must keep, as an API that any store package can run
/// in its own tests (as fluent-kit ships FluentBenchmark): the in-memory stores,
/// SQLite and PostgreSQL run it in this package.
///
/// ```swift
/// for check in StoreContract.checks {
///     try await StoreContract.run(check) {
///         let store = try await MyStore.open(fresh: true)
///         return (StoreContract.Stores(credentials: store, challenges: store, accounts: store, sessions: store), { try await store.close() })
///     }
/// }
/// ```
///
/// Each check gets fresh, empty stores. A broken promise throws ``Failure``
/// naming the check and what was expected.
public enum StoreContract {
    /// The four stores under test (often one object).
    public struct Stores: Sendable {
        /// The credential store under test.
        public let credentials: any CredentialStore
        /// The challenge store under test.
        public let challenges: any ChallengeStore
        /// The account store under test.
        public let accounts: any AccountStore
        /// The session store under test.
        public let sessions: any SessionStore
        /// The linked identities (Sign in with Apple), kept with the accounts.
        public let identities: any LinkedIdentityStore

        /// The stores under test; `identities` is usually the account store itself.
        public init(
            credentials: any CredentialStore, challenges: any ChallengeStore, accounts: any AccountStore, sessions: any SessionStore,
            identities: any LinkedIdentityStore
        ) {
            self.credentials = credentials
            self.challenges = challenges
            self.accounts = accounts
            self.sessions = sessions
            self.identities = identities
        }
    }

    /// One promise of the contract.
    public struct Check: Sendable, CustomStringConvertible {
        /// A short stable name, such as `compareAndSet`.
        public let name: String
        /// What the check verifies.
        public let summary: String
        let body: @Sendable (Stores) async throws -> Void
        /// The check's ``name``.
        public var description: String { name }
    }

    /// A broken promise.
    public struct Failure: Error, CustomStringConvertible {
        /// The ``Check/name`` of the check that failed.
        public let check: String
        /// What was expected, and what happened.
        public let message: String
        /// The line, in the contract's source, of the failed expectation.
        public let line: Int
        /// `store contract <check>, line <line>: <message>`.
        public var description: String { "store contract \(check), line \(line): \(message)" }
    }

    /// Opens fresh stores and returns them with the function that closes them.
    public typealias Open = @Sendable () async throws -> (Stores, @Sendable () async throws -> Void)

    /// Runs one check against fresh stores from `open`, closing them afterwards.
    public static func run(_ check: Check, open: Open) async throws {
        let (stores, close) = try await open()
        do {
            try await CheckContext.$name.withValue(check.name) { try await check.body(stores) }
        } catch {
            try? await close()
            throw error
        }
        try await close()
    }

    /// Runs every check, each against fresh stores.
    public static func verify(open: Open) async throws {
        for check in checks { try await run(check, open: open) }
    }

    enum CheckContext {
        @TaskLocal static var name = ""
    }

    static func expect(_ condition: Bool, _ message: @autoclosure () -> String = "expectation failed", line: Int = #line) throws {
        guard condition else { throw Failure(check: CheckContext.name, message: message(), line: line) }
    }

    static func require<T>(_ value: T?, _ message: String, line: Int = #line) throws -> T {
        guard let value else { throw Failure(check: CheckContext.name, message: "expected " + message + ", found nil", line: line) }
        return value
    }

    static func expectThrows(line: Int = #line, _ body: () async throws -> Void) async throws {
        do { try await body() } catch is WebAuthnError { return }
        throw Failure(check: CheckContext.name, message: "expected a WebAuthnError", line: line)
    }

    static func errorCode(_ body: () async throws -> Void) async -> String? {
        do { try await body() } catch let error as WebAuthnError { return error.code.rawValue } catch { return "\(error)" }
        return nil
    }

    static func record(_ id: [UInt8] = SecureRandom.bytes(16), user: [UInt8] = Array("u1".utf8), count: UInt32 = 0) throws -> CredentialRecord {
        let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey()))
        return CredentialRecord(
            id: id, userHandle: user, publicKey: key, signCount: count, transports: ["usb", "nfc"], uvInitialized: false,
            backupEligible: true, backupState: false, aaguid: AAGUID(bytes: SecureRandom.bytes(16))!, attestationFormat: "packed",
            createdAt: Date(timeIntervalSince1970: 1_800_000_000),
            properties: CredentialProperties(
                discoverable: true, authenticatorAttachment: .crossPlatform, credentialProtection: .userVerificationRequired, prfEnabled: true,
                largeBlobSupported: false, minPinLength: 6))
    }

    static func ceremony(
        _ challenge: [UInt8] = SecureRandom.bytes(32), binding: [UInt8]? = [7, 7, 7],
        expiresAt: Date = Date(timeIntervalSince1970: 1_900_000_000.5)
    ) throws -> PendingCeremony {
        PendingCeremony(
            kind: .registration, challenge: challenge, user: try UserEntity(id: [1, 2], name: "alice", displayName: "Alice"),
            userHandle: nil, allowCredentials: [[9, 9]], algorithms: [.es256, .edDSA], userVerification: .required,
            conditionalCreate: true, newAccount: true, residentKey: .required, authenticatorAttachment: .platform,
            credentialProtection: CredentialProtectionRequest(policy: .userVerificationOptionalWithCredentialIDList, enforce: true),
            binding: binding, expiresAt: expiresAt)
    }

    /// Every check, in order.
    public static let checks: [Check] = [
        Check(name: "credentials", summary: "credentials: insert, read back every field, refuse a duplicate, list by user, delete", body: credentialsCheck),
        Check(
            name: "credentialNames", summary: "credentials: the owner renames one (only their own), and nothing else about it changes",
            body: credentialNamesCheck),
        Check(
            name: "audit",
            summary:
                "credentials (stores that are CredentialAuditing): chain and flag round-trip; a scan in batches sees each once; a metadata change flags exactly the affected credentials, and clears them",
            body: auditCheck),
        Check(
            name: "compareAndSet", summary: "credentials: the counter update is a compare-and-set; of concurrent updates from one count exactly one wins",
            body: compareAndSetCheck),
        Check(
            name: "concurrentWrites",
            summary: "concurrent writes (stores may commit them together): a refused one fails alone; every acknowledged one is stored",
            body: concurrentWritesCheck),
        Check(name: "challenges", summary: "challenges: stored ceremonies round-trip and are consumed exactly once, even concurrently", body: challengesCheck),
        Check(
            name: "signInCommit",
            summary: "sign-in commits (stores that are SignInCommitting): the challenge consumed and the counter compare-and-set together, exactly once",
            body: signInCommitCheck),
        Check(
            name: "challengeBounds", summary: "challenges: a binding keeps its newest ceremonies only; a sweep removes the expired ones and counts the rest",
            body: challengeBoundsCheck),
        Check(name: "accounts", summary: "accounts: an account exists only with its first credential; names are unique by look-alike key", body: accountsCheck),
        Check(name: "sessions", summary: "sessions: stored by hash, read back, ended, at most maxPerUser per account, swept when expired", body: sessionsCheck),
        Check(
            name: "identities", summary: "identities: an account created with its first identity, unique by provider and subject; link, update, relink, unlink",
            body: identitiesCheck),
        Check(
            name: "accountDeletion", summary: "accounts: deleting one removes its credentials and identities (and sessions where kept) and nothing else",
            body: accountDeletionCheck),
    ]

    static func identity(_ subject: String, user: [UInt8], email: String? = "a@privaterelay.appleid.com") -> LinkedIdentity {
        LinkedIdentity(
            provider: "apple", subject: subject, userHandle: user, email: email, emailVerified: true, isPrivateEmail: true,
            refreshToken: [1, 2, 3], createdAt: Date(timeIntervalSince1970: 1_800_000_000))
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
        // The same subject again, for a new name: nothing is created.
        let eve = UserEntity.new(name: "eve")
        try expect(await errorCode { try await identities.create(eve, firstIdentity: identity("001234.abc", user: eve.id)) } == "identity_already_linked")
        try expect(try await stores.accounts.account(named: "eve") == nil, "no account without its identity")
        // A taken name: nothing is created either.
        let dana2 = UserEntity.new(name: "DANA")
        try expect(await errorCode { try await identities.create(dana2, firstIdentity: identity("999.x", user: dana2.id)) } == "username_unavailable")
        try expect(try await identities.identity(provider: "apple", subject: "999.x") == nil, "no identity without its account")
        // Link a second identity to the existing account; not to an unknown one, not twice.
        try await identities.link(identity("002.def", user: dana.id, email: nil))
        try expect(await errorCode { try await identities.link(identity("003.ghi", user: [9, 9, 9])) } == "account_unknown")
        try expect(await errorCode { try await identities.link(identity("002.def", user: dana.id)) } == "identity_already_linked")
        try expect(try await identities.identities(forUser: dana.id).map(\.subject).sorted() == ["001234.abc", "002.def"], "both identities listed")
        try expect(await errorCode { try await identities.link(identity("", user: dana.id)) } == "identity_invalid")
        // Update the mutable fields.
        var changed = first
        changed.email = "new@example.com"
        changed.emailVerified = false
        changed.refreshToken = nil
        changed.updatedAt = Date(timeIntervalSince1970: 1_800_000_100)
        try expect(try await identities.update(changed), "update finds the identity")
        let back = try require(try await identities.identity(provider: "apple", subject: "001234.abc"), "the updated identity")
        try expect(
            back.email == "new@example.com" && back.emailVerified == false && back.refreshToken == nil && back.updatedAt == changed.updatedAt,
            "updated fields read back")
        try expect(back.createdAt == first.createdAt && back.userHandle == dana.id, "the link itself does not change")
        try expect(!(try await identities.update(identity("nobody", user: dana.id))), "update of an unknown identity is false")
        // Relink (a team transfer): same account, new subject; never onto a taken subject.
        try expect(
            try await identities.relink(provider: "apple", subject: "002.def", to: "777.new", at: Date(timeIntervalSince1970: 1_800_000_200)), "relinked")
        try expect(try await identities.identity(provider: "apple", subject: "002.def") == nil, "the old subject is gone")
        try expect(try await identities.identity(provider: "apple", subject: "777.new")?.userHandle == dana.id, "the new subject signs in to the account")
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
        try expect(try await stores.accounts.deleteAccount(handle: frank.id), "the account is deleted")
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
    }

    static func concurrentWritesCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        let taken = try record()
        try await credentials.insert(taken)
        // 48 inserts at once, every third one a duplicate of a stored ID: each duplicate is refused
        // with its own code, and the others are stored, whatever group they were committed in.
        let attempts = try (0..<48).map { i in i % 3 == 0 ? try record(taken.id, user: Array("dup\(i)".utf8)) : try record() }
        let outcomes = await withTaskGroup(of: (Int, String?).self) { group in
            for (i, r) in attempts.enumerated() { group.addTask { (i, await errorCode { try await credentials.insert(r) }) } }
            return await group.reduce(into: [Int: String?]()) { $0[$1.0] = $1.1 }
        }
        for (i, r) in attempts.enumerated() {
            if i % 3 == 0 {
                try expect(outcomes[i] == "credential_already_registered", "duplicate \(i): \(String(describing: outcomes[i]))")
            } else {
                try expect(outcomes[i] == .some(nil), "insert \(i): \(String(describing: outcomes[i]))")
                try expect(try await credentials.credential(id: r.id) != nil, "acknowledged insert \(i) is stored")
            }
        }
        try expect(try await credentials.credential(id: taken.id)?.userHandle == taken.userHandle, "the first owner keeps its credential")
        // Concurrent challenge inserts and consumes: each consumed exactly once.
        let challenges = stores.challenges
        let ceremonies = try (0..<32).map { _ in try ceremony(binding: nil) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for c in ceremonies { group.addTask { try await challenges.insert(c) } }
            try await group.waitForAll()
        }
        let consumed = await withTaskGroup(of: Int.self) { group in
            for c in ceremonies + ceremonies { group.addTask { (try? await challenges.consume(challenge: c.challenge)) == nil ? 0 : 1 } }
            return await group.reduce(0, +)
        }
        try expect(consumed == ceremonies.count, "\(consumed) consumed of \(ceremonies.count)")
    }

    static func credentialsCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        let r = try record()
        try await credentials.insert(r)
        let back = try require(try await credentials.credential(id: r.id), "a value")
        try expect(back.userHandle == r.userHandle && back.publicKey.bytes == r.publicKey.bytes && back.signCount == 0)
        try expect(back.transports == ["usb", "nfc"] && back.backupEligible && !back.backupState && back.aaguid == r.aaguid)
        try expect(back.attestationFormat == "packed" && back.createdAt == r.createdAt && back.lastUsedAt == nil)
        try expect(back.name == nil && back.properties == r.properties, "properties read back as \(back.properties)")
        try await expectThrows { try await credentials.insert(try record(r.id)) }
        try await credentials.insert(try record(user: Array("u2".utf8)))
        try expect(try await credentials.credentials(forUser: r.userHandle).count == 1)
        try expect(try await credentials.delete(id: r.id))
        try expect(!(try await credentials.delete(id: r.id)))
        try expect(try await credentials.credential(id: r.id) == nil)
    }

    static func credentialNamesCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        let r = try record(count: 5)
        try await credentials.insert(r)
        try expect(try await credentials.rename(id: r.id, ofUser: r.userHandle, to: "Work laptop — 2 ✓"))
        let named = try require(try await credentials.credential(id: r.id), "the credential")
        try expect(named.name == "Work laptop — 2 ✓", "the name reads back as \(named.name ?? "nil")")
        try expect(named.signCount == 5 && named.properties == r.properties && named.publicKey.bytes == r.publicKey.bytes)
        try expect(!(try await credentials.rename(id: r.id, ofUser: Array("someone else".utf8), to: "mine now")), "another user renamed it")
        try expect(try await credentials.credential(id: r.id)?.name == "Work laptop — 2 ✓")
        try expect(!(try await credentials.rename(id: SecureRandom.bytes(16), ofUser: r.userHandle, to: "x")), "renamed a credential that does not exist")
        try expect(try await credentials.rename(id: r.id, ofUser: r.userHandle, to: nil))
        try expect(try await credentials.credential(id: r.id)?.name == nil, "the name was not cleared")
    }

    static func auditCheck(_ stores: Stores) async throws {
        guard let store = stores.credentials as? any CredentialAuditing else { return }
        let t = Date(timeIntervalSince1970: 1_900_000_000)
        let day: TimeInterval = 86_400
        let u2fCertificate = try AttestationAuthority.generate().packedCertificate(aaguid: [UInt8](repeating: 0, count: 16))
        let keyID = try require(u2fCertificate.publicKeyIdentifier, "the certificate's key identifier")
        func model() throws -> AAGUID { try require(AAGUID(bytes: SecureRandom.bytes(16)), "an AAGUID") }
        let (compromised, fine, future, unknown) = (try model(), try model(), try model(), try model())
        func make(_ aaguid: AAGUID, chain: [[UInt8]] = []) throws -> CredentialRecord {
            let r = try record()
            return CredentialRecord(
                id: r.id, userHandle: r.userHandle, publicKey: r.publicKey, signCount: 0, uvInitialized: true, backupEligible: false,
                backupState: false, aaguid: aaguid, attestationFormat: chain.isEmpty ? .none : .fidoU2F, createdAt: r.createdAt, attestationChain: chain)
        }
        let a = try make(compromised), b = try make(fine), c = try make(.zero, chain: [u2fCertificate.der]), d = try make(future), e = try make(unknown)
        for r in [a, b, c, d, e] { try await store.insert(r) }
        try expect(try await store.credential(id: c.id)?.attestationChain == [u2fCertificate.der], "the attestation chain did not round-trip")
        // A scan in batches of 2 sees each credential once, in byte order.
        var seen: [[UInt8]] = []
        var cursor: [UInt8]?
        while true {
            let batch = try await store.credentials(after: cursor, limit: 2)
            seen += batch.map(\.id)
            guard batch.count == 2 else { break }
            cursor = batch.last?.id
        }
        try expect(
            seen == [a, b, c, d, e].map(\.id).sorted { $0.lexicographicallyPrecedes($1) }, "the scan saw \(seen.count) credentials, not each once in order")
        let anchors = TrustAnchors(metadata: [
            MetadataEntry(
                aaguid: compromised, description: "Key A", rootCertificates: [],
                statusReports: [
                    StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: t - 100 * day),
                    StatusReport(status: AuthenticatorStatus(rawValue: "ATTESTATION_KEY_COMPROMISE"), effectiveDate: t - day),
                ]),
            MetadataEntry(
                aaguid: fine, description: "Key B", rootCertificates: [], statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"))]
            ),
            MetadataEntry(
                aaguid: nil, attestationCertificateKeyIdentifiers: [keyID], description: "U2F key", rootCertificates: [],
                statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "REVOKED"))]),
            MetadataEntry(
                aaguid: future, description: "Key D", rootCertificates: [],
                statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "USER_VERIFICATION_BYPASS"), effectiveDate: t + 10 * day)]),
        ])
        // A dry run reports and writes nothing.
        let dry = try await CredentialAudit.run(store: store, anchors: anchors, at: t, batchSize: 2, write: false)
        let afterDry = try await store.credential(id: a.id)
        try expect(dry.flagged.count == 2 && afterDry?.flag == nil, "a dry run wrote a flag")
        let first = try await CredentialAudit.run(store: store, anchors: anchors, at: t, batchSize: 2)
        try expect(first.scanned == 5, "scanned \(first.scanned)")
        try expect(Set(first.flagged.map(\.credentialId).map(ByteString.init)) == Set([a.id, c.id].map(ByteString.init)), "flagged \(first.flagged.count)")
        let flagA = try require(try await store.credential(id: a.id)?.flag, "A's flag")
        try expect(flagA.status.rawValue == "ATTESTATION_KEY_COMPROMISE" && !flagA.attested && flagA.since == t - day, "A's flag: \(flagA)")
        let flagC = try require(try await store.credential(id: c.id)?.flag, "the U2F credential's flag")
        try expect(flagC.status.rawValue == "REVOKED" && flagC.attested && flagC.authenticator == "U2F key", "C's flag: \(flagC)")
        for r in [b, d, e] { try expect(try await store.credential(id: r.id)?.flag == nil, "an unaffected credential was flagged") }
        // Nothing changed: nothing new. Later, D's report takes effect.
        let again = try await CredentialAudit.run(store: store, anchors: anchors, at: t)
        try expect(again.flagged.isEmpty && again.cleared.isEmpty && again.stillFlagged == 2)
        let later = try await CredentialAudit.run(store: store, anchors: anchors, at: t + 11 * day)
        try expect(later.flagged.map(\.credentialId) == [d.id], "D was not flagged once its report took effect")
        // A later report that A is certified again clears it; only it.
        var fixed = TrustAnchors(metadata: [
            MetadataEntry(
                aaguid: compromised, description: "Key A", rootCertificates: [],
                statusReports: [
                    StatusReport(status: AuthenticatorStatus(rawValue: "ATTESTATION_KEY_COMPROMISE"), effectiveDate: t - day),
                    StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: t + day),
                ])
        ])
        fixed.add(anchors.metadata.filter { $0.aaguid != compromised })
        let cleared = try await CredentialAudit.run(store: store, anchors: fixed, at: t + 11 * day)
        try expect(cleared.cleared.map(\.credentialId) == [a.id] && cleared.flagged.isEmpty, "cleared \(cleared.cleared.count)")
        let (aNow, cNow) = (try await store.credential(id: a.id), try await store.credential(id: c.id))
        try expect(aNow?.flag == nil && cNow?.flag != nil)
        try expect(!(try await store.setFlag(nil, id: SecureRandom.bytes(16))), "flagged a credential that does not exist")
        // The flag survives the sign-in's counter update.
        let flagged = try require(try await store.credential(id: c.id), "C")
        var used = flagged
        used.signCount = 3
        try expect(try await store.update(used, expectedSignCount: 0))
        try expect(try await store.credential(id: c.id)?.flag == flagged.flag, "a counter update cleared the flag")
    }

    /// Byte strings as set members.
    struct ByteString: Hashable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    static func compareAndSetCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        var r = try record(count: 5)
        try await credentials.insert(r)
        r.signCount = 6
        r.backupState = true
        r.lastUsedAt = Date(timeIntervalSince1970: 1_850_000_000)
        try expect(!(try await credentials.update(r, expectedSignCount: 4)))
        try expect(try await credentials.update(r, expectedSignCount: 5))
        try expect(!(try await credentials.update(r, expectedSignCount: 5)))
        let back = try require(try await credentials.credential(id: r.id), "a value")
        try expect(back.signCount == 6 && back.backupState && back.lastUsedAt == r.lastUsedAt)
        // Concurrent compare-and-sets from the same count: exactly one wins.
        var next = back
        next.signCount = 7
        let candidate = next
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { (try? await credentials.update(candidate, expectedSignCount: 6)) ?? false } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        try expect(wins == 1)
    }

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
    }
}
