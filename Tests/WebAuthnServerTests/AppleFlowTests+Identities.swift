import Foundation
import Synchronization
import Testing
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

extension AppleFlowTests {
    @Test("the owner sees the account's linked Apple IDs and unlinks one (revoked at Apple, its sessions ended), never the last way in")
    func unlinkIdentity() async throws {
        // Red team, thirteenth pass: an intruder linked their own Apple ID through a fresh session;
        // nothing listed it or removed it, and it signed in, verified, from then on.
        let offset = Mutex<TimeInterval>(0)
        try await Self.withServer(clock: WebAuthnClock { Date().addingTimeInterval(offset.withLock { $0 }) }) { setup, port in
            let owner = Client(port: port), intruder = Client(port: port)
            let ownerID = AppleStandIn.User(email: "owner@example.com"), intruderID = AppleStandIn.User()
            func signIn(_ client: Client, _ user: AppleStandIn.User) async throws -> Int {
                let nonce = try #require(try await client.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                return try await client.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce)).status
            }
            #expect(try await signIn(owner, ownerID) == 200)
            // Through the owner's fresh session (left unattended), the intruder links their Apple ID,
            // then signs in with it from their own browser.
            let unattended = Client(port: port)
            unattended.cookies = owner.cookies
            #expect(try await signIn(unattended, intruderID) == 200)
            #expect(try await signIn(intruder, intruderID) == 200)
            #expect(try await signIn(owner, ownerID) == 200)  // the owner comes back (the link rotated that session)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: ownerID.sub)?.userHandle)
            #expect(try await setup.store.identity(provider: "apple", subject: intruderID.sub)?.userHandle == handle)
            // Listed, for the owner.
            let listed = try await owner.send("/demo/identities", method: "GET").body["identities"]?.arrayValue ?? []
            let ids = listed.compactMap { $0["id"]?.stringValue }
            #expect(ids == [ownerID.sub, intruderID.sub].map { Base64URL.encode(Array($0.utf8)) }, "\(listed)")
            #expect(listed.first?["email"]?.stringValue == "owner@example.com" && listed.first?["provider"]?.stringValue == "apple")
            // Unlinked: gone, its refresh token revoked, the intruder's session ended, the owner's kept.
            let unlinked = try await owner.send("/demo/identities/\(ids[1])", method: "DELETE")
            #expect(unlinked.status == 200 && (unlinked.body["otherSessionsEnded"]?.numberValue ?? 0) >= 1, "\(unlinked.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: intruderID.sub) == nil)
            #expect(setup.standIn.revocations.count == 1)
            #expect(try await intruder.send("/demo/session", method: "GET").body["user"] == .null)
            #expect(try await owner.send("/demo/session", method: "GET").body["user"]?.stringValue != nil)
            // Signing in with it again makes a new account, not the owner's.
            #expect(try await signIn(Client(port: port), intruderID) == 200)
            #expect(try await setup.store.identity(provider: "apple", subject: intruderID.sub)?.userHandle != handle)
            // The account's last way in stays; another account's identity, or nonsense, is unknown.
            let last = try await owner.send("/demo/identities/\(ids[0])", method: "DELETE")
            #expect(last.status == 409 && last.body["errorMessage"]?.stringValue?.hasPrefix("last_credential: this Apple ID") == true, "\(last.body)")
            for id in [ids[1], "!!", Base64URL.encode([0xFF, 0xFE])] {
                let unknown = try await owner.send("/demo/identities/\(id)", method: "DELETE")
                #expect(unknown.status == 400 && unknown.body["errorMessage"]?.stringValue?.hasPrefix("identity_unknown") == true, "\(id): \(unknown.body)")
            }
            #expect(try await setup.store.identity(provider: "apple", subject: ownerID.sub) != nil)
            // A session past the step-up window may list, not unlink.
            offset.withLock { $0 = 400 }
            #expect(try await owner.send("/demo/identities", method: "GET").status == 200)
            let stale = try await owner.send("/demo/identities/\(ids[0])", method: "DELETE")
            #expect(stale.status == 401 && stale.body["errorMessage"]?.stringValue?.hasPrefix("reauthentication_required") == true, "\(stale.body)")
        }
    }
}
