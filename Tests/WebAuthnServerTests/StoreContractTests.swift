import Foundation
import Testing
@testable @_spi(Testing) import WebAuthnCore
import WebAuthnSQLite
@testable import WebAuthnPostgres
import WebAuthnTesting

/// The contract of CredentialStore, ChallengeStore and AccountStore, run
/// against every backend: in-memory and SQLite.
@Suite("Store contract")
struct StoreContractTests {
    typealias Stores = (credentials: any CredentialStore, challenges: any ChallengeStore, accounts: any AccountStore)

    struct Backend: Sendable, CustomStringConvertible {
        let description: String
        let open: @Sendable () async throws -> (Stores, @Sendable () async throws -> Void)

        /// Runs `body` with fresh stores and closes them afterwards.
        func with(_ body: (Stores) async throws -> Void) async throws {
            let (stores, close) = try await open()
            do { try await body(stores) } catch { try await close(); throw error }
            try await close()
        }
    }

    /// The throw-away PostgreSQL `make test` starts (Tests/postgres.sh), if any.
    static let postgresURL = ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]

    static let backends: [Backend] = [
        Backend(description: "in-memory") { ((InMemoryCredentialStore(), InMemoryChallengeStore(), InMemoryAccountStore()), {}) },
        Backend(description: "sqlite") {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString).sqlite").path
            let store = try await SQLiteStore.open(path: path)
            return ((store, store, store), { try await store.close() })
        },
    ] + (postgresURL.map { url in
        [Backend(description: "postgres") {
            // A fresh schema per test, so tests running in parallel do not share rows.
            let schema = "contract_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
            let store = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 4)
            return ((store, store, store), {})
        }]
    } ?? [])

    static func record(_ id: [UInt8] = SecureRandom.bytes(16), user: [UInt8] = Array("u1".utf8), count: UInt32 = 0) throws -> CredentialRecord {
        let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey()))
        return CredentialRecord(id: id, userHandle: user, publicKey: key, signCount: count, transports: ["usb", "nfc"], uvInitialized: false,
                                backupEligible: true, backupState: false, aaguid: AAGUID(bytes: SecureRandom.bytes(16))!, attestationFormat: "packed",
                                createdAt: Date(timeIntervalSince1970: 1_800_000_000))
    }

    static func ceremony(_ challenge: [UInt8] = SecureRandom.bytes(32)) throws -> PendingCeremony {
        PendingCeremony(kind: .registration, challenge: challenge, user: try UserEntity(id: [1, 2], name: "alice", displayName: "Alice"),
                        userHandle: nil, allowCredentials: [[9, 9]], algorithms: [.es256, .edDSA], userVerification: .required,
                        conditionalMediation: true, expiresAt: Date(timeIntervalSince1970: 1_900_000_000.5))
    }

    @Test("credentials: insert, read back every field, refuse a duplicate, list by user, delete", arguments: backends)
    func credentials(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let credentials = stores.credentials
            let r = try Self.record()
            try await credentials.insert(r)
            let back = try #require(try await credentials.credential(id: r.id))
            #expect(back.userHandle == r.userHandle && back.publicKey.bytes == r.publicKey.bytes && back.signCount == 0)
            #expect(back.transports == ["usb", "nfc"] && back.backupEligible && !back.backupState && back.aaguid == r.aaguid)
            #expect(back.attestationFormat == "packed" && back.createdAt == r.createdAt && back.lastUsedAt == nil)
            await #expect(throws: WebAuthnError.self) { try await credentials.insert(try Self.record(r.id)) }
            try await credentials.insert(try Self.record(user: Array("u2".utf8)))
            #expect(try await credentials.credentials(forUser: r.userHandle).count == 1)
            #expect(try await credentials.delete(id: r.id))
            #expect(!(try await credentials.delete(id: r.id)))
            #expect(try await credentials.credential(id: r.id) == nil)
        }
    }

    @Test("credentials: the counter update is a compare-and-set", arguments: backends)
    func compareAndSet(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let credentials = stores.credentials
            var r = try Self.record(count: 5)
            try await credentials.insert(r)
            r.signCount = 6
            r.backupState = true
            r.lastUsedAt = Date(timeIntervalSince1970: 1_850_000_000)
            #expect(!(try await credentials.update(r, expectedSignCount: 4)))
            #expect(try await credentials.update(r, expectedSignCount: 5))
            #expect(!(try await credentials.update(r, expectedSignCount: 5)))
            let back = try #require(try await credentials.credential(id: r.id))
            #expect(back.signCount == 6 && back.backupState && back.lastUsedAt == r.lastUsedAt)
            // Concurrent compare-and-sets from the same count: exactly one wins.
            var next = back
            next.signCount = 7
            let candidate = next
            let wins = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<16 { group.addTask { (try? await credentials.update(candidate, expectedSignCount: 6)) ?? false } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(wins == 1)
        }
    }

    @Test("challenges: stored ceremonies round-trip and are consumed exactly once, even concurrently", arguments: backends)
    func challenges(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let challenges = stores.challenges
            let c = try Self.ceremony()
            try await challenges.insert(c)
            let peeked = try #require(try await challenges.pending(challenge: c.challenge))
            #expect(peeked.user == c.user && peeked.algorithms == c.algorithms && peeked.allowCredentials == c.allowCredentials)
            #expect(peeked.userVerification == .required && peeked.conditionalMediation && peeked.expiresAt == c.expiresAt)
            let consumers = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<16 { group.addTask { (try? await challenges.consume(challenge: c.challenge)) != nil } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(consumers == 1)
            #expect(try await challenges.pending(challenge: c.challenge) == nil)
        }
    }

    @Test("accounts: get-or-create is atomic", arguments: backends)
    func accounts(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let accounts = stores.accounts
            let ids = await withTaskGroup(of: [UInt8]?.self) { group in
                for _ in 0..<16 {
                    group.addTask { try? await accounts.account(named: "bob", creating: UserEntity.new(name: "bob")).id }
                }
                return await group.reduce(into: Set<[UInt8]>()) { if let id = $1 { $0.insert(id) } }
            }
            #expect(ids.count == 1)
            #expect(try await accounts.account(named: "bob")?.id == ids.first)
            #expect(try await accounts.account(handle: ids.first!)?.name == "bob")
            #expect(try await accounts.account(named: "nobody") == nil)
        }
    }
}
