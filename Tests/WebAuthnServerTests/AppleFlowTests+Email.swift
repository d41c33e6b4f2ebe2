import Foundation
import Testing
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

extension AppleFlowTests {
    @Test("email-disabled and email-enabled set whether mail is delivered, in the order Apple dated them, not the order they arrive")
    func emailForwarding() async throws {
        // Noticed in round 28 (N4): two email events were applied in arrival order, and neither was
        // kept: the record had no place for "the user stopped the relay forwarding this site's
        // mail", so a site went on mailing an address that delivers nothing.
        try await Self.withServer { setup, port in
            let relay = "x7k2@privaterelay.appleid.com"
            var user = AppleStandIn.User(email: relay, isPrivateEmail: true)
            let app = Client(port: port)
            func pause() async throws { try await Task.sleep(for: .milliseconds(20)) }
            func deliver(_ type: String, at time: Date, email: String? = nil) async throws {
                var event: JSONObject = ["type": .string(type), "sub": .string(user.sub), "is_private_email": "true"]
                event["email"] = .string(email ?? relay)
                #expect(try await Client(port: port).send("/apple/notifications", json: Self.notification(setup, event, at: time)).status == 200)
            }
            func stored() async throws -> LinkedIdentity { try #require(try await setup.store.identity(provider: "apple", subject: user.sub)) }

            let beforeLink = Date().addingTimeInterval(-60)
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            #expect(try await stored().emailEnabled == nil, "nothing said yet")
            // About an earlier consent: changes nothing.
            try await deliver("email-disabled", at: beforeLink)
            #expect(try await stored().emailEnabled == nil)

            try await pause()
            let older = Date()
            try await pause()
            let newer = Date()
            try await pause()
            // The newer one arrives first; the older one, delivered late, is older news.
            try await deliver("email-disabled", at: newer)
            #expect(try await stored().emailEnabled == false)
            try await deliver("email-enabled", at: older)
            #expect(try await stored().emailEnabled == false, "applied in arrival order, it enabled mail again")
            #expect(abs((try await stored().emailChangedAt ?? .distantPast).timeIntervalSince(newer)) < 0.01)
            let listed = try await app.send("/demo/identities", method: "GET").body["identities"]?.arrayValue?.first
            #expect(listed?["emailEnabled"] == .bool(false), "\(String(describing: listed))")

            // Dated before a later sign-in with the same address: it still says whether mail is
            // delivered (it was ignored as superseded), and the address stays the sign-in's.
            try await pause()
            let beforeSignIn = Date()
            try await pause()
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            try await deliver("email-enabled", at: beforeSignIn)
            #expect(try await stored().emailEnabled == true)
            #expect(try await stored().email == relay)

            // A sign-in that brings another address: nothing is known of it, and an event dated
            // before that sign-in is about the old one.
            try await pause()
            let aboutOld = Date()
            try await pause()
            user.email = "shared@example.com"
            user.isPrivateEmail = false
            #expect(try await Self.appleSignIn(app, setup, user).status == 200)
            #expect(try await stored().email == "shared@example.com")
            #expect(try await stored().emailEnabled == nil)
            try await deliver("email-disabled", at: aboutOld)
            #expect(try await stored().emailEnabled == nil)
            #expect(try await stored().email == "shared@example.com")
        }
    }
}
