import Foundation
import Synchronization
import Testing
import WebAuthnCore
import WebAuthnSQLite
import WebAuthnTesting
import _WebAuthnCrypto

extension AppleFlowTests {
    @Test("an Apple ID signing in while its account is deleted gets no session, and its new refresh token is revoked")
    func signInBesideDeletion() async throws {
        // Red team, twelfth pass (PostgreSQL): an Apple sign-in that found its account just before
        // another request deleted it stored a session of the deleted account.
        try await Self.withServer(interleaving: true) { setup, port in
            let app = Client(port: port)
            let user = AppleStandIn.User()
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: user.sub)?.userHandle)
            let phone = Client(port: port)
            let nonce = try #require(try await phone.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
            // The account goes after the sign-in has found it, before it writes.
            let store = setup.store
            setup.interleaving?.beforeUpdate.withLock { $0 = { _ = try await store.deleteAccount(handle: handle) } }
            let late = try await phone.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce))
            #expect(late.status == 400 && late.body["errorMessage"]?.stringValue?.hasPrefix("account_unknown") == true, "\(late.body)")
            #expect(try await store.deleteSessions(userHandle: handle) == 0, "no session of the deleted account is left")
            #expect(try await phone.send("/demo/session", method: "GET").body["user"] == .null)
            #expect(setup.standIn.revocations.count == 1, "the refresh token just issued is revoked: nothing holds it")
        }
    }

    @Test("an Apple ID linked while its account is being deleted has its refresh token revoked")
    func linkBesideDeletion() async throws {
        // Red team, twelfth pass: the identity went with the account, but its refresh token, stored
        // after the deletion had read the tokens to revoke, was never revoked at Apple.
        try await Self.withServer(interleaving: true) { setup, port in
            let app = Client(port: port)
            let owner = AppleStandIn.User(), second = AppleStandIn.User()
            #expect(try await Self.appleSignIn(app, setup, owner).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: owner.sub)?.userHandle)
            // Another tab of the same browser links a second Apple ID after the deletion read the tokens.
            let tab = Client(port: port)
            tab.cookies = app.cookies
            let linked = Mutex(0)
            setup.interleaving?.afterIdentities.withLock {
                $0 = {
                    let nonce = try #require(try await tab.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
                    let reply = try await tab.send("/apple/signin", json: Self.signInBody(setup, user: second, nonce: nonce))
                    linked.withLock { $0 = reply.status }
                }
            }
            let deleted = try await app.send("/demo/account", method: "DELETE")
            #expect(deleted.status == 200, "\(deleted.body)")
            #expect(linked.withLock { $0 } == 200, "the second Apple ID was linked during the deletion")
            #expect(try await setup.store.account(handle: handle) == nil)
            #expect(try await setup.store.identity(provider: "apple", subject: second.sub) == nil)
            let revoked = setup.standIn.revocations.map(\.token)
            #expect(revoked.count == 2 && Set(revoked).count == 2, "both Apple IDs' refresh tokens are revoked: \(revoked)")
        }
    }

    /// Signs in with Apple as `user` from `client`: the status and the body.
    static func appleSignIn(_ client: Client, _ setup: Setup, _ user: AppleStandIn.User) async throws -> (status: Int, body: JSONValue) {
        let nonce = try #require(try await client.send("/apple/nonce", json: "{}").body["nonce"]?.stringValue)
        let reply = try await client.send("/apple/signin", json: Self.signInBody(setup, user: user, nonce: nonce))
        return (reply.status, reply.body)
    }

    @Test("a link that finds its account deleted fails and revokes the token it was just issued (no identity holds it)")
    func failedLinkRevokes() async throws {
        // Red team, thirteenth pass: the link answered account_unknown and left the new refresh
        // token unrevoked, held by nobody (18 rounds of 150 on PostgreSQL, 6 of 100 on SQLite).
        try await Self.withServer(interleaving: true) { setup, port in
            let owner = Client(port: port)
            let first = AppleStandIn.User(), second = AppleStandIn.User()
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: first.sub)?.userHandle)
            let store = setup.store
            setup.interleaving?.beforeLink.withLock { $0 = { _ = try await store.deleteAccount(handle: handle) } }
            let linking = try await Self.appleSignIn(owner, setup, second)
            #expect(linking.status == 400 && linking.body["errorMessage"]?.stringValue?.hasPrefix("account_unknown") == true, "\(linking.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: second.sub) == nil)
            #expect(setup.standIn.revocations.count == 1, "the second Apple ID's new token is revoked")
        }
    }

    @Test("a link whose session ends (signed out everywhere) before it is answered is taken back, and its token revoked")
    func linkBesideSignOutEverywhere() async throws {
        // Red team, thirteenth pass: sign-out everywhere answered that every session had ended, and
        // the intruder's Apple ID, linked through one of them, stayed linked and signed in.
        try await Self.withServer(interleaving: true) { setup, port in
            let owner = Client(port: port)
            let first = AppleStandIn.User(), intruder = AppleStandIn.User()
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: first.sub)?.userHandle)
            let store = setup.store
            func takenBack(_ linking: (status: Int, body: JSONValue)) async throws {
                #expect(linking.status == 401 && linking.body["errorMessage"]?.stringValue?.hasPrefix("sign_in_required") == true, "\(linking.body)")
                #expect(try await store.identity(provider: "apple", subject: intruder.sub) == nil, "the link is taken back")
                #expect(try await store.deleteSessions(userHandle: handle) == 0, "no session of the account is left")
            }
            // Ended just after the link.
            setup.interleaving?.afterLink.withLock { $0 = { _ = try await store.deleteSessions(userHandle: handle) } }
            try await takenBack(try await Self.appleSignIn(owner, setup, intruder))
            // Ended later, as the link's new session is stored (re-check: 2 to 25 rounds of 150 got
            // past a first fix that read the session once, just after the link).
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            setup.interleaving?.beforeSessionWrite.withLock { $0 = { _ = try await store.deleteSessions(userHandle: handle) } }
            try await takenBack(try await Self.appleSignIn(owner, setup, intruder))
            #expect(setup.standIn.revocations.count == 2, "the intruder's tokens are revoked")
        }
    }

    @Test("a link through the account's oldest session, at the per-account session limit, succeeds")
    func linkAtTheSessionLimit() async throws {
        // Red team, thirteenth pass (second re-check): a first "in place of" fix stored the new session
        // first, which pushed the linking session out under the limit, and the user's own link failed.
        try await Self.withServer { setup, port in
            let owner = Client(port: port)
            let first = AppleStandIn.User(), second = AppleStandIn.User()
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: first.sub)?.userHandle)
            for i in 1..<SignedInSession.maxPerUser {
                try await setup.store.insert(
                    SignedInSession(
                        idHash: SecureRandom.bytes(32), userHandle: handle, createdAt: Date().addingTimeInterval(Double(i)), authenticatedAt: Date(),
                        expiresAt: Date().addingTimeInterval(3600)))
            }
            let linked = try await Self.appleSignIn(owner, setup, second)
            #expect(linked.status == 200, "\(linked.body)")
            #expect(try await setup.store.identity(provider: "apple", subject: second.sub)?.userHandle == handle)
        }
    }

    @Test("the same new Apple ID signing in on two devices at once: the second signs in to the account the first made")
    func concurrentFirstSignIn() async throws {
        // Red team, thirteenth pass: one of the two got identity_already_linked (48 to 84 rounds of 100).
        try await Self.withServer(interleaving: true) { setup, port in
            let user = AppleStandIn.User()
            let winner = UserEntity.new(name: "apple-winner")
            let store = setup.store
            setup.interleaving?.beforeCreate.withLock {
                $0 = {
                    try await store.create(
                        winner, firstIdentity: LinkedIdentity(provider: "apple", subject: user.sub, userHandle: winner.id, createdAt: Date()))
                }
            }
            let device = Client(port: port)
            let reply = try await Self.appleSignIn(device, setup, user)
            #expect(reply.status == 200 && reply.body["created"]?.boolValue == false, "\(reply.body)")
            #expect(try await device.send("/demo/session", method: "GET").body["user"]?.stringValue == "apple-winner")
            #expect(try await setup.store.identity(provider: "apple", subject: user.sub)?.refreshToken != nil, "its token is kept, not revoked")
            #expect(setup.standIn.revocations.isEmpty)
        }
    }

    @Test(
        "a write of an Apple ID's identity racing its web-flow sign-in keeps the web flow's token (compare-and-set)",
        arguments: ["a sign-in through the app", "an email notification"])
    func writeBesideWebFlow(_ writer: String) async throws {
        // Red team, thirteenth pass (re-check): two sign-ins of one Apple ID, through the app and the
        // web flow at once, each wrote back the tokens it had read; the web flow's token was lost and
        // never revoked when the account was deleted (10 to 18 rounds of 60). A notification changing
        // the email wrote back the tokens it had read in the same way.
        try await Self.withServer(interleaving: true) { setup, port in
            let user = AppleStandIn.User()
            let app = Client(port: port)
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            // The web flow signs in after the writer has read the identity, before it writes.
            let web = try await WebFlowInFlight(setup, port: port, user: user)
            setup.interleaving?.beforeUpdate.withLock { $0 = web.finish }
            if writer == "a sign-in through the app" {
                #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            } else {
                let payload = Self.notification(
                    setup, ["type": "email-enabled", "sub": .string(user.sub), "email": "relay@privaterelay.appleid.com", "is_private_email": "true"],
                    at: Date().addingTimeInterval(60))
                #expect(try await Client(port: port).send("/apple/notifications", json: payload).status == 200)
                #expect(try await setup.store.identity(provider: "apple", subject: user.sub)?.email == "relay@privaterelay.appleid.com")
            }
            #expect(web.status == 303, "the web flow signed in meanwhile")
            #expect(try await app.send("/demo/account", method: "DELETE").status == 200)
            let sent = setup.standIn.revocations
            #expect(Set(sent.map(\.clientID)) == [Self.clientID, Self.servicesID], "both client ids' tokens are revoked: \(sent)")
        }
    }

    @Test("a link that loses to the same Apple ID's first sign-in through the web flow: its token is kept by that identity, and revoked with its account")
    func failedLinkTokenKept() async throws {
        // Red team, fourteenth pass: the link's token (the app's) was neither kept nor revoked, as
        // the identity the web flow made "held a token", of the Services ID (17 to 21 rounds of 100).
        try await Self.withServer(interleaving: true) { setup, port in
            let owner = Client(port: port)
            let first = AppleStandIn.User(), second = AppleStandIn.User()
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            let web = try await WebFlowInFlight(setup, port: port, user: second)
            setup.interleaving?.beforeLink.withLock { $0 = web.finish }
            let linking = try await Self.appleSignIn(owner, setup, second)
            #expect(linking.body["errorMessage"]?.stringValue?.hasPrefix("identity_already_linked") == true, "\(linking.body)")
            #expect(web.status == 303, "the web flow made the Apple ID's account meanwhile")
            #expect(setup.standIn.revocations.isEmpty, "nothing revoked: the web flow's authorization stays")
            #expect(try await web.browser.send("/demo/account", method: "DELETE").status == 200)
            let sent = setup.standIn.revocations
            #expect(sent.count == 2 && Set(sent.map(\.clientID)) == [Self.clientID, Self.servicesID], "both of the Apple ID's tokens revoked: \(sent)")
        }
    }
    @Test("a link taken back after sign-out everywhere takes back what signed in through it: the web flow's session and token")
    func takenBackWithItsSignIns() async throws {
        // Red team, fourteenth pass (re-check, PostgreSQL, 4 rounds of 350): the same Apple ID's
        // first web-flow sign-in found the link before it was taken back; its token was lost with the
        // identity, never revoked, and its browser stayed signed in to the account.
        try await Self.withServer(interleaving: true) { setup, port in
            let owner = Client(port: port)
            let first = AppleStandIn.User(), second = AppleStandIn.User()
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: first.sub)?.userHandle)
            let web = try await WebFlowInFlight(setup, port: port, user: second)
            let store = setup.store
            // Just after the link: the owner signs out everywhere, then the web flow signs in through the link.
            setup.interleaving?.afterLink.withLock {
                $0 = {
                    _ = try await store.deleteSessions(userHandle: handle)
                    try await web.finish()
                }
            }
            let linking = try await Self.appleSignIn(owner, setup, second)
            #expect(linking.status == 401, "\(linking.body)")
            #expect(web.status == 303, "the web flow signed in through the link meanwhile")
            #expect(try await store.identity(provider: "apple", subject: second.sub) == nil, "the link is taken back")
            #expect(try await web.browser.send("/demo/session", method: "GET").body["user"] == .null, "the web flow's session ended")
            let sent = setup.standIn.revocations
            #expect(Set(sent.map(\.clientID)) == [Self.clientID, Self.servicesID], "the link's and the web flow's tokens revoked: \(sent)")
        }
    }

    @Test("a link taken back does not take the Apple ID from another account it was linked to in between")
    func takeBackLeavesAnotherAccount() async throws {
        // Red team, fourteenth pass (second re-check, by reading): the take-back read the identity's
        // account, then unlinked unconditionally; an unlink and another account's link in between
        // would be undone, and that account's tokens revoked.
        try await Self.withServer(interleaving: true) { setup, port in
            let owner = Client(port: port)
            let first = AppleStandIn.User(), second = AppleStandIn.User()
            #expect(try await Self.appleSignIn(owner, setup, first).status == 200)
            let handle = try #require(try await setup.store.identity(provider: "apple", subject: first.sub)?.userHandle)
            let store = setup.store, other = UserEntity.new(name: "apple-other")
            setup.interleaving?.afterLink.withLock { $0 = { _ = try await store.deleteSessions(userHandle: handle) } }
            setup.interleaving?.beforeUnlink.withLock {
                $0 = {
                    _ = try await store.unlink(provider: "apple", subject: second.sub)
                    try await store.create(
                        other, firstIdentity: LinkedIdentity(provider: "apple", subject: second.sub, userHandle: other.id, createdAt: Date()))
                }
            }
            let linking = try await Self.appleSignIn(owner, setup, second)
            #expect(linking.status == 401, "\(linking.body)")
            #expect(try await store.identity(provider: "apple", subject: second.sub)?.userHandle == other.id, "the other account keeps its link")
        }
    }

    /// The body Apple posts to `/apple/notifications` for `event` (its `event_time` set to `time`,
    /// or absent).
    static func notification(_ setup: Setup, _ event: JSONObject, at time: Date?, issuedAt: Date = Date()) -> String {
        var event = event
        if let time { event["event_time"] = .number((time.timeIntervalSince1970 * 1000).rounded()) }
        let claims: JSONValue = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.clientID), "iat": .number(issuedAt.timeIntervalSince1970.rounded(.down)),
            "jti": .string(UUID().uuidString), "events": .string(JSONValue.object(event).serialized()),
        ]
        return JSONValue.object(["payload": .string(setup.standIn.token(claimsJSON: claims.serialized()))]).serialized()
    }

    @Test("a consent-revoked judged current is not applied over a sign-in that came after it was judged")
    func consentRevokedBesideSignIn() async throws {
        // Red team, fourteenth pass (re-check, PostgreSQL, 1 round of 370): a late consent-revoked,
        // judged not superseded, unlinked the identity just after a newer sign-in, whose token was
        // then held by nobody; the Apple-only account went with it.
        try await Self.withServer(interleaving: true) { setup, port in
            let user = AppleStandIn.User()
            let app = Client(port: port)
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            try await Task.sleep(for: .milliseconds(30))
            let revokedAt = Date().addingTimeInterval(-0.01)
            try await Task.sleep(for: .milliseconds(20))
            // The user signs in again after the notification has read and judged the identity.
            let phone = Client(port: port)
            let status = Mutex(0)
            setup.interleaving?.beforeUnlink.withLock {
                $0 = {
                    let reply = try await Self.appleSignIn(phone, setup, user)
                    status.withLock { $0 = reply.status }
                }
            }
            let note = Self.notification(setup, ["type": "consent-revoked", "sub": .string(user.sub)], at: revokedAt)
            #expect(try await Client(port: port).send("/apple/notifications", json: note).status == 200)
            #expect(status.withLock { $0 } == 200, "the sign-in came between")
            #expect(try await setup.store.identity(provider: "apple", subject: user.sub) != nil, "the newer sign-in's link stays")
            #expect(try await phone.send("/demo/session", method: "GET").body["user"] != .null, "and its session")
            #expect(setup.standIn.revocations.isEmpty)
        }
    }

    @Test("an email event delivered before a revocation dated earlier does not make the revocation look superseded")
    func emailEventBeforeRevocation() async throws {
        // Red team, round 28 (F1): an email-enabled or email-disabled event stamped the identity
        // with its own time (the server's clock when it had no event_time), and a consent-revoked
        // dated between the sign-in and that stamp, delivered after it, was judged superseded: the
        // Apple ID stayed linked and its sessions signed in. Only a sign-in supersedes a revocation.
        for dated in [false, true] {
            try await Self.withServer { setup, port in
                let user = AppleStandIn.User(email: "old@example.com")
                let app = Client(port: port)
                #expect(try await Self.appleSignIn(app, setup, user).status == 200)
                try await Task.sleep(for: .milliseconds(20))
                let revokedAt = Date()
                try await Task.sleep(for: .milliseconds(20))
                let email = Self.notification(
                    setup, ["type": "email-disabled", "sub": .string(user.sub), "email": "new@privaterelay.appleid.com", "is_private_email": "true"],
                    at: dated ? Date() : nil)
                #expect(try await Client(port: port).send("/apple/notifications", json: email).status == 200)
                #expect(try await setup.store.identity(provider: "apple", subject: user.sub)?.email == "new@privaterelay.appleid.com", "applied")
                let note = Self.notification(setup, ["type": "consent-revoked", "sub": .string(user.sub)], at: revokedAt)
                #expect(try await Client(port: port).send("/apple/notifications", json: note).status == 200)
                #expect(try await setup.store.identity(provider: "apple", subject: user.sub) == nil, "event_time given: \(dated)")
                #expect(try await app.send("/demo/session", method: "GET").body["user"] == .null, "signed out")
            }
        }
    }

    @Test("a revocation or deletion without event_time is judged by its iat: one issued before a sign-in does not undo it")
    func undatedRevocationBeforeSignIn() async throws {
        // Re-check of round 28 (N3): without `event_time` nothing was compared, so a consent-revoked
        // or account-delete Apple issued before the user signed in again, delivered after it,
        // unlinked the new link, ended its sessions and deleted the Apple-only account.
        for kind in ["consent-revoked", "account-delete"] {
            try await Self.withServer { setup, port in
                let user = AppleStandIn.User()
                let app = Client(port: port)
                #expect(try await Self.appleSignIn(app, setup, user).status == 200)
                let event: JSONObject = ["type": .string(kind), "sub": .string(user.sub)]
                let late = Self.notification(setup, event, at: nil, issuedAt: Date().addingTimeInterval(-100))
                #expect(try await Client(port: port).send("/apple/notifications", json: late).status == 200)
                #expect(try await setup.store.identity(provider: "apple", subject: user.sub) != nil, "\(kind) issued before the sign-in")
                let session = try await app.send("/demo/session", method: "GET").body["user"]
                #expect(session != nil && session != JSONValue.null, "\(kind): still signed in")
                // One issued after the sign-in applies.
                let current = Self.notification(setup, event, at: nil)
                #expect(try await Client(port: port).send("/apple/notifications", json: current).status == 200)
                #expect(try await setup.store.identity(provider: "apple", subject: user.sub) == nil, "\(kind) issued after the sign-in")
                #expect(try await app.send("/demo/session", method: "GET").body["user"] == .null, "\(kind): signed out")
            }
        }
    }
}

/// A browser that has started Apple's web flow for a user, and the hook that finishes it (the
/// callback Apple's form would post), for a store hook to run in the middle of another request.
final class WebFlowInFlight: Sendable {
    let browser: AppleFlowTests.Client
    private let form: String
    private let answered = Mutex(0)

    init(_ setup: AppleFlowTests.Setup, port: Int, user: AppleStandIn.User) async throws {
        browser = AppleFlowTests.Client(port: port)
        form = try await AppleFlowTests.webFlowForm(browser, setup, user: user)
    }

    /// The callback's status; 0 before it ran.
    var status: Int { answered.withLock { $0 } }

    var finish: Interleaving.Hook {
        { [self] in
            let status = try await browser.send("/apple/web/callback", form: form).status
            answered.withLock { $0 = status }
        }
    }
}
