import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnSQLite
import WebAuthnPostgres
import WebAuthnTesting

/// The credential limit (`WebAuthnEngine.Limits.maxCredentialsPerUser`) over the real stores,
/// against registrations finished all at once (red team: ceremonies started below the limit,
/// eight per session in many sessions, took one account from 31 credentials to 807).
@Suite("Credential limit on the stores")
struct CredentialLimitTests {
    @Test("registrations started below the limit and finished at once store only up to it", arguments: ServerTests.sharedDatabases)
    func concurrentFinishes(kind: String) async throws {
        let store: any CredentialStore & ChallengeStore & AccountStore
        if kind == "postgres" {
            store = try await PostgresStore.open(url: ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]!, connections: 4)
        } else {
            store = try await SQLiteStore.open(path: ServeProcess.temporaryDatabase())
        }
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"])
        let engine = WebAuthnEngine(
            relyingParty: rp, credentials: store, challenges: store, accounts: store, limits: WebAuthnEngine.Limits(maxCredentialsPerUser: 3))
        let user = UserEntity.new(name: "limit-\(UUID().uuidString.prefix(8))")
        func parts(_ options: CreationOptions) throws -> RegistrationParts {
            try SoftwareAuthenticator().register(rpId: "example.com", origin: "https://example.com", challenge: options.challenge, userHandle: user.id)
        }
        _ = try await engine.finishRegistration(json: try parts(try await engine.startRegistration(user: user, newAccount: true)).jsonBytes)
        // Twelve ceremonies started while the user holds one, finished at once: two fit.
        var pending: [RegistrationParts] = []
        for _ in 0..<12 { pending.append(try parts(try await engine.startRegistration(user: user))) }
        let outcomes = await Self.finishAtOnce(pending, on: [engine])
        #expect(outcomes.filter { $0 == "stored" }.count == 2, "\(outcomes)")
        #expect(outcomes.filter { $0 == "credential_limit_reached" }.count == 10, "\(outcomes)")
        #expect(try await store.credentials(forUser: user.id).count == 3)
        #expect(engine.registrationsByUser.heldCount == 0)
    }

    @Test("two processes sharing a store, finishing registrations at once, store only up to the limit", arguments: ServerTests.sharedDatabases)
    func acrossProcesses(kind: String) async throws {
        // Each engine below is a process of its own: its own store connections and its own
        // one-registration-at-a-time per user. Before the store checked the limit, each let one
        // past it (the last notes' "one past the cap per process").
        let path = ServeProcess.temporaryDatabase()
        func open() async throws -> any CredentialStore & ChallengeStore & AccountStore {
            if kind == "postgres" { return try await PostgresStore.open(url: ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]!, connections: 4) }
            return try await SQLiteStore.open(path: path)
        }
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"])
        var engines: [WebAuthnEngine] = []
        for _ in 0..<2 {
            let store = try await open()
            engines.append(
                WebAuthnEngine(
                    relyingParty: rp, credentials: store, challenges: store, accounts: store, limits: WebAuthnEngine.Limits(maxCredentialsPerUser: 2)))
        }
        let user = UserEntity.new(name: "limit-\(UUID().uuidString.prefix(8))")
        func parts(_ options: CreationOptions) throws -> RegistrationParts {
            try SoftwareAuthenticator().register(rpId: "example.com", origin: "https://example.com", challenge: options.challenge, userHandle: user.id)
        }
        _ = try await engines[0].finishRegistration(json: try parts(try await engines[0].startRegistration(user: user, newAccount: true)).jsonBytes)
        // Twelve ceremonies started while the user holds one, finished at once, half by each: one fits.
        var pending: [RegistrationParts] = []
        for _ in 0..<12 { pending.append(try parts(try await engines[0].startRegistration(user: user, addingToAccount: true))) }
        let outcomes = await Self.finishAtOnce(pending, on: engines)
        #expect(outcomes.filter { $0 == "stored" }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == "credential_limit_reached" }.count == 11, "\(outcomes)")
        #expect(try await engines[1].credentials.credentials(forUser: user.id).count == 2)
    }

    /// Finishes every registration at once, in turn on each engine: "stored", or the error's code.
    static func finishAtOnce(_ pending: [RegistrationParts], on engines: [WebAuthnEngine]) async -> [String] {
        await withTaskGroup(of: String.self) { group in
            for (i, p) in pending.enumerated() {
                let engine = engines[i % engines.count]
                group.addTask {
                    do {
                        _ = try await engine.finishRegistration(json: p.jsonBytes)
                        return "stored"
                    } catch { return (error as? WebAuthnError)?.code.rawValue ?? "\(error)" }
                }
            }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
    }
}
