internal import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

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

    static func record(
        _ id: [UInt8] = SecureRandom.bytes(16), user: [UInt8] = Array("u1".utf8), count: UInt32 = 0,
        createdAt: Date = Date(timeIntervalSince1970: 1_800_000_000)
    ) throws -> CredentialRecord {
        let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey()))
        return CredentialRecord(
            id: id, userHandle: user, publicKey: key, signCount: count, transports: ["usb", "nfc"], uvInitialized: false,
            backupEligible: true, backupState: false, aaguid: AAGUID(bytes: SecureRandom.bytes(16))!, attestationFormat: "packed",
            createdAt: createdAt,
            properties: CredentialProperties(
                discoverable: true, authenticatorAttachment: .crossPlatform, credentialProtection: .userVerificationRequired, prfEnabled: true,
                largeBlobSupported: false, minPinLength: 6))
    }

    /// Whether a record read back is the one stored: every field a store keeps.
    static func same(_ a: CredentialRecord?, _ b: CredentialRecord) -> Bool {
        guard let a else { return false }
        return a.id == b.id && a.userHandle == b.userHandle && a.publicKey.bytes == b.publicKey.bytes && a.signCount == b.signCount
            && a.transports == b.transports && a.uvInitialized == b.uvInitialized && a.backupEligible == b.backupEligible
            && a.backupState == b.backupState && a.aaguid == b.aaguid && a.attestationFormat == b.attestationFormat && a.createdAt == b.createdAt
            && a.lastUsedAt == b.lastUsedAt && a.name == b.name && a.properties == b.properties
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
            name: "signInWithSession",
            summary:
                "sign-in reads and commits (SignInCommitting stores that keep sessions): ceremony and credential read together; the session replaced in the commit, only when it commits",
            body: signInWithSessionCheck),
        Check(
            name: "registrationCommit",
            summary:
                "registration commits (SignInCommitting stores that keep accounts and sessions): the challenge consumed, the credential (and account) and session stored together; a refusal changes nothing",
            body: registrationCommitCheck),
        Check(
            name: "challengeBounds", summary: "challenges: a binding keeps its newest ceremonies only; a sweep removes the expired ones and counts the rest",
            body: challengeBoundsCheck),
        Check(name: "accounts", summary: "accounts: an account exists only with its first credential; names are unique by look-alike key", body: accountsCheck),
        Check(
            name: "sessions",
            summary: "sessions: stored by hash, read back, ended, at most maxPerUser per account, swept when expired; all of an account's but one ended",
            body: sessionsCheck),
        Check(
            name: "sessionCeremonies",
            summary: "sessions (stores keeping ceremonies too): a session that ends, is replaced or is ended with its account's takes its pending ceremonies",
            body: sessionCeremoniesCheck),
        Check(
            name: "sessionReplace", summary: "sessions: a replacement ends the old session and stores the new one, within maxPerUser",
            body: sessionReplaceCheck),
        Check(
            name: "sessionReplaceStored",
            summary: "sessions: a replacement that stands on the old session stores nothing once it has ended, and an ending racing it leaves no session",
            body: sessionReplaceStoredCheck),
        Check(
            name: "accountWithCredentials", summary: "accounts: an account read with its credentials, oldest first, by look-alike key",
            body: accountWithCredentialsCheck),
        Check(
            name: "identities", summary: "identities: an account created with its first identity, unique by provider and subject; link, update, relink, unlink",
            body: identitiesCheck),
        Check(
            name: "accountDeletion",
            summary:
                "accounts: deleting one removes its credentials and identities (and its sessions, and the ceremonies pending under them, where kept) and nothing else; the reporting deletion names the identities it removed",
            body: accountDeletionCheck),
        Check(
            name: "lastWayIn",
            summary:
                "accounts (stores keeping credentials and identities with them): a credential is deleted, or an identity unlinked, only while its account keeps another way in, in one transaction",
            body: lastWayInCheck),
    ]
}
