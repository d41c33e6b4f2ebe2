import Foundation
import Hummingbird
import Testing
import WebAuthnCore
import WebAuthnServer
import WebAuthnTesting
import _WebAuthnEncoding

extension EmbeddingTests {
    /// Sessions kept in memory that fail every read once `failing` is set, with an error that is
    /// not a `WebAuthnError` (as a database driver's would be).
    final class FlakySessions: SessionStore {
        struct DriverError: Error {}
        let kept = InMemorySessionStore()
        let failing = Locked(false)
        func insert(_ session: SignedInSession) async throws { try await kept.insert(session) }
        func session(idHash: [UInt8]) async throws -> SignedInSession? {
            if failing.withLock({ $0 }) { throw DriverError() }
            return try await kept.session(idHash: idHash)
        }
        func delete(idHash: [UInt8]) async throws { try await kept.delete(idHash: idHash) }
        func deleteSessions(userHandle: [UInt8]) async throws -> Int { try await kept.deleteSessions(userHandle: userHandle) }
        func deleteSessions(userHandle: [UInt8], except kept: [UInt8]) async throws -> Int {
            try await self.kept.deleteSessions(userHandle: userHandle, except: kept)
        }
        func sweepSessions(expiredBefore date: Date) async throws -> Int { try await kept.sweepSessions(expiredBefore: date) }
        func replace(_ old: [UInt8]?, with session: SignedInSession) async throws { try await kept.replace(old, with: session) }
        func replace(stored old: [UInt8], with session: SignedInSession) async throws -> Bool { try await kept.replace(stored: old, with: session) }
    }

    @Test("a host route's signedInAccount and requireRecentVerification throw WebAuthnError: a session store's own error becomes storage_failure")
    func stepUpHelpersTyped() async throws {
        // Adopter's review: both threw untyped errors, so a host route could not switch on the code
        // of a store failure (a driver's error reached it as is).
        let rp = try RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
        let credentials = InMemoryCredentialStore()
        let accounts = InMemoryAccountStore(credentials: credentials)
        let engine = WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: InMemoryChallengeStore(clock: rp.clock), accounts: accounts)
        let sessions = FlakySessions()
        let webauthn = try WebAuthnRoutes(
            engine: engine, accounts: accounts, sessions: sessions, configuration: ServerConfiguration(secret: Array(repeating: 5, count: 32)))
        let router = Router(context: WebAuthnRequestContext.self)
        router.addRoutes(webauthn.routes(), atPath: "/webauthn")
        router.get("/who") { request, _ -> String in
            do throws(WebAuthnError) {
                return try await webauthn.signedInAccount(request).map(Base64URL.encode) ?? "nobody"
            } catch {
                return "who: \(error.code.rawValue)"  // the helpers throw WebAuthnError only: no cast
            }
        }
        router.get("/pay") { request, _ -> String in
            do throws(WebAuthnError) { return Base64URL.encode(try await webauthn.requireRecentVerification(request)) } catch {
                return "pay: \(error.code.rawValue)"
            }
        }
        try await Self.serving({ running in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { await running($0.localAddress?.port ?? 0) })
        }) { port in
            let browser = AppleFlowTests.Client(port: port)
            #expect(try await browser.send("/pay", method: "GET").body == .string("pay: sign_in_required"))
            let options = try await browser.send("/webauthn/attestation/options", json: #"{"username":"ines","displayName":"Ines"}"#)
            let challenge = try #require(options.body["challenge"]?.stringValue.flatMap(Base64URL.decode))
            let handle = try #require(options.body["user"]?["id"]?.stringValue.flatMap(Base64URL.decode))
            let parts = try SoftwareAuthenticator(profile: .platformPasskey).register(
                rpId: "example.com", origin: "https://example.com", challenge: challenge, userHandle: handle)
            #expect(try await browser.send("/webauthn/attestation/result", json: parts.json.serialized()).status == 200)
            #expect(try await browser.send("/who", method: "GET").body == .string(Base64URL.encode(handle)))
            #expect(try await browser.send("/pay", method: "GET").body == .string(Base64URL.encode(handle)))
            sessions.failing.withLock { $0 = true }
            #expect(try await browser.send("/who", method: "GET").body == .string("who: storage_failure"))
            #expect(try await browser.send("/pay", method: "GET").body == .string("pay: storage_failure"))
        }
    }
}
