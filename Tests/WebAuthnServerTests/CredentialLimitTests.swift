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
        let outcomes = await withTaskGroup(of: String.self) { group in
            for p in pending {
                group.addTask {
                    do {
                        _ = try await engine.finishRegistration(json: p.jsonBytes)
                        return "stored"
                    } catch { return (error as? WebAuthnError)?.code.rawValue ?? "\(error)" }
                }
            }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == "stored" }.count == 2, "\(outcomes)")
        #expect(outcomes.filter { $0 == "credential_limit_reached" }.count == 10, "\(outcomes)")
        #expect(try await store.credentials(forUser: user.id).count == 3)
        #expect(engine.registrationsByUser.heldCount == 0)
    }
}
