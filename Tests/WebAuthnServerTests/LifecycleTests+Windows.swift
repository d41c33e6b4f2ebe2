import Foundation
import Testing
import WebAuthnTesting
import _WebAuthnEncoding

extension LifecycleTests {
    @Test("adding a passkey: the session must still be recently verified when the result arrives, not only when the options were asked for")
    func additionVerifiedAtResult() async throws {
        // Red team, thirteenth pass: with a 30 s window, options asked for at 25 s were finished at
        // 45 s, and the passkey was stored: the window stretched by the challenge's lifetime.
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (first, cookie, _) = try await register(server, authenticator, username: "erin")
        let options = try await server.request("/attestation/options", ["username": "erin"], cookie: cookie)
        #expect(options.ok, "within the window: \(options.errorMessage)")
        try await ageSessions(server)  // the window passes before the result
        let (_, late) = try await finish(server, options, authenticator, cookie: cookie)
        #expect(late.status == 401 && late.errorMessage.hasPrefix("reauthentication_required"), "\(late.errorMessage)")
        let listed = try await server.request("/demo/credentials", cookie: cookie).json["credentials"]?.arrayValue
        #expect(listed?.compactMap { $0["id"]?.stringValue } == [Base64URL.encode(first)], "nothing added")
    }
}
