import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnSQLite
@testable import WebAuthnPostgres
import WebAuthnTesting
import WebAuthnMetadata
import WebAuthnConformance
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The contract of CredentialStore, ChallengeStore, AccountStore and
/// SessionStore, run against every backend: in-memory, SQLite and PostgreSQL.
@Suite("Store contract")
struct StoreContractTests {
    typealias Stores = (credentials: any CredentialStore, challenges: any ChallengeStore, accounts: any AccountStore, sessions: any SessionStore)

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
        Backend(description: "in-memory") {
            let credentials = InMemoryCredentialStore()
            return ((credentials, InMemoryChallengeStore(), InMemoryAccountStore(credentials: credentials), InMemorySessionStore()), {})
        },
        Backend(description: "sqlite") {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString).sqlite").path
            let store = try await SQLiteStore.open(path: path)
            return ((store, store, store, store), { try await store.close() })
        },
    ] + (postgresURL.map { url in
        [Backend(description: "postgres") {
            // A fresh schema per test, so tests running in parallel do not share rows.
            let schema = "contract_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
            let store = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 4)
            return ((store, store, store, store), {})
        }]
    } ?? [])

    /// The public contract suite (WebAuthnTesting.StoreContract), every check on every backend.
    static let cases: [(Backend, StoreContract.Check)] = backends.flatMap { b in StoreContract.checks.map { (b, $0) } }

    @Test("the store contract (WebAuthnTesting.StoreContract)", arguments: cases)
    func contract(backend: Backend, check: StoreContract.Check) async throws {
        try await StoreContract.run(check) {
            let (stores, close) = try await backend.open()
            return (StoreContract.Stores(credentials: stores.credentials, challenges: stores.challenges, accounts: stores.accounts, sessions: stores.sessions), close)
        }
    }

    @Test("the contract suite catches a store that breaks its promise")
    func catchesABrokenStore() async throws {
        // A challenge store that hands a ceremony out twice.
        final class Leaky: ChallengeStore, @unchecked Sendable {
            let inner = InMemoryChallengeStore()
            func insert(_ ceremony: PendingCeremony) async throws { try await inner.insert(ceremony) }
            func pending(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.pending(challenge: challenge) }
            func consume(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.pending(challenge: challenge) }
            func sweep(expiredBefore date: Date) async throws -> Int { try await inner.sweep(expiredBefore: date) }
        }
        let check = try #require(StoreContract.checks.first { $0.name == "challenges" })
        await #expect(throws: StoreContract.Failure.self) {
            try await StoreContract.run(check) {
                let credentials = InMemoryCredentialStore()
                return (StoreContract.Stores(credentials: credentials, challenges: Leaky(), accounts: InMemoryAccountStore(credentials: credentials),
                                             sessions: InMemorySessionStore()), {})
            }
        }
    }
}
