import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
@testable import WebAuthnSQLite
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The passkey lifecycle over HTTP: step-up before sensitive actions, rename,
/// Signals, provider names, conditional create, hints.
@Suite("Passkey lifecycle over HTTP", .serialized)
struct LifecycleTests {
    let rpId = ServeProcess.rpId
    let origin = ServeProcess.origin

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let providerSample = repository.appendingPathComponent("TestVectors/passkey-providers/sample.json").path
    /// The iCloud Keychain AAGUID, as the sample (and the community list) name it.
    static let iCloudKeychain: [UInt8] = Bytes.fromHex("fbfc3007154e4ecc8c0b6e020557d7bd")!

    /// A passkey that verifies the user, with the iCloud Keychain AAGUID.
    static func passkey() -> SoftwareAuthenticator {
        var profile = SoftwareAuthenticator.Profile.platformPasskey
        profile.aaguid = iCloudKeychain
        return SoftwareAuthenticator(profile: profile)
    }

    func start() async throws -> ServeProcess {
        try await ServeProcess(database: ServeProcess.temporaryDatabase(), extra: ["--passkey-providers", Self.providerSample, "--rate-limit", "off"])
    }

    /// Registers `username` (a new account); returns the credential id and the signed-in cookie.
    func register(
        _ server: ServeProcess, _ authenticator: SoftwareAuthenticator, username: String, cookie: String? = nil, extra: JSONObject = [:],
        change: (inout RegistrationParts) -> Void = { _ in }
    ) async throws -> (id: [UInt8], cookie: String?, reply: ServeProcess.Reply) {
        var body: JSONObject = ["username": .string(username)]
        for member in extra.members { body[member.key] = member.value }
        let options = try await server.request("/attestation/options", .object(body), cookie: cookie)
        guard options.ok else { return ([], nil, options) }
        let challenge = Base64URL.decode(options.json["challenge"]!.stringValue!)!
        let user = Base64URL.decode(options.json["user"]!["id"]!.stringValue!)!
        var parts = try authenticator.register(rpId: rpId, origin: origin, challenge: challenge, userHandle: user)
        change(&parts)
        let result = try await server.request("/attestation/result", parts.json, cookie: options.cookie ?? cookie)
        return (parts.id, result.cookie ?? options.cookie ?? cookie, result)
    }

    /// Finishes a registration whose options were `options`, with `authenticator`: its parts and the result's reply.
    func finish(
        _ server: ServeProcess, _ options: ServeProcess.Reply, _ authenticator: SoftwareAuthenticator, cookie: String?
    ) async throws -> (RegistrationParts, ServeProcess.Reply) {
        let parts = try authenticator.register(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!,
            userHandle: Base64URL.decode(options.json["user"]!["id"]!.stringValue!)!)
        return (parts, try await server.request("/attestation/result", parts.json, cookie: options.cookie ?? cookie))
    }

    /// Signs in by name; `verified` false strips UV from the assertion (as a sign-in that only checks presence).
    func signIn(_ server: ServeProcess, _ authenticator: SoftwareAuthenticator, username: String, id: [UInt8], verified: Bool) async throws -> String? {
        let options = try await server.request("/assertion/options", ["username": .string(username), "userVerification": "discouraged"])
        var parts = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!, credentialId: id)
        if !verified {
            parts.authenticatorData.flags.remove(.userVerified)
            parts = try authenticator.resign(parts)
        }
        let result = try await server.request("/assertion/result", parts.json, cookie: options.cookie)
        #expect(result.ok, "\(result.errorMessage)")
        return result.cookie
    }

    @Test("a refused re-authentication (another account's credential) changes nothing: its challenge and the counter stay, the session is not renewed")
    func refusedReauthenticationChangesNothing() async throws {
        let server = try await start()
        defer { server.stop() }
        let alice = Self.passkey(), bob = Self.passkey()
        let (_, aliceCookie, _) = try await register(server, alice, username: "alice")
        let (bobId, _, _) = try await register(server, bob, username: "bob")
        // Signed in as alice, the browser asks for bob's options and finishes them as a re-authentication.
        let options = try await server.request("/assertion/options", ["username": "bob"], cookie: aliceCookie)
        let cookie = options.cookie ?? aliceCookie
        let assertion = try bob.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!, credentialId: bobId)
        let refused = try await server.request("/reauthentication/result", assertion.json, cookie: cookie)
        #expect(refused.status == 401 && refused.errorMessage.hasPrefix("reauthentication_required"), "\(refused.errorMessage)")
        #expect(refused.cookie == nil, "no renewed session")
        // Nothing was written: the same assertion, with its challenge and counter, still signs in (as bob) once.
        let signedIn = try await server.request("/assertion/result", assertion.json, cookie: cookie)
        #expect(signedIn.ok, "the refusal consumed the challenge or moved the counter: \(signedIn.errorMessage)")
        let again = try await server.request("/assertion/result", assertion.json, cookie: cookie)
        #expect(!again.ok)
    }

    @Test("step-up: deleting needs a recent UV assertion by the signed-in account; re-authentication gives it, and the answer carries the signal")
    func stepUp() async throws {
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (first, _, _) = try await register(server, authenticator, username: "alice")
        // Signed in again without user verification: not recent enough for a deletion.
        var cookie = try await signIn(server, authenticator, username: "alice", id: first, verified: false)
        let (second, added, reply) = try await register(server, authenticator, username: "alice", cookie: cookie)
        #expect(!reply.ok && reply.errorMessage.hasPrefix("reauthentication_required"), "adding a passkey: \(reply.errorMessage)")
        #expect(second.isEmpty && added == nil)
        let refused = try await server.request("/demo/credentials/\(Base64URL.encode(first))", cookie: cookie, method: "DELETE")
        #expect(refused.status == 401 && refused.errorMessage.hasPrefix("reauthentication_required"))
        // Re-authenticate: the options ask for UV and list the account's credentials only.
        let options = try await server.request("/reauthentication/options", [:], cookie: cookie)
        #expect(options.json["userVerification"]?.stringValue == "required")
        #expect(options.json["allowCredentials"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [Base64URL.encode(first)])
        var assertion = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!, credentialId: first)
        // Without UV it does not count.
        assertion.authenticatorData.flags.remove(.userVerified)
        let weak = try await server.request("/reauthentication/result", try authenticator.resign(assertion).json, cookie: cookie)
        #expect(!weak.ok)
        let again = try await server.request("/reauthentication/options", [:], cookie: cookie)
        let strong = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(again.json["challenge"]!.stringValue!)!, credentialId: first)
        let done = try await server.request("/reauthentication/result", strong.json, cookie: cookie)
        #expect(done.ok, "\(done.errorMessage)")
        #expect(done.cookie != nil && done.cookie != cookie, "a re-authentication rotates the session")
        cookie = done.cookie
        // Now a second passkey can be added, and the first deleted.
        let (third, thirdCookie, ok) = try await register(server, authenticator, username: "alice", cookie: cookie)
        #expect(ok.ok, "\(ok.errorMessage)")
        cookie = thirdCookie
        let deleted = try await server.request("/demo/credentials/\(Base64URL.encode(first))", cookie: cookie, method: "DELETE")
        #expect(deleted.ok, "\(deleted.errorMessage)")
        #expect(deleted.json["signal"]?["method"]?.stringValue == "signalAllAcceptedCredentials")
        #expect(deleted.json["signal"]?["options"]?["allAcceptedCredentialIds"]?.arrayValue?.compactMap(\.stringValue) == [Base64URL.encode(third)])
        #expect(deleted.json["signal"]?["options"]?["rpId"]?.stringValue == rpId)
        // Without a session at all: sign in first.
        let anonymous = try await server.request("/reauthentication/options", [:])
        #expect(anonymous.errorMessage.hasPrefix("sign_in_required"))
    }

    /// Makes every session of the server's database unverified, as if the window had passed.
    func ageSessions(_ server: ServeProcess) async throws {
        let store = try await SQLiteStore.open(path: server.database)
        _ = try await store.connection.query("UPDATE sessions SET authenticated_at = -1e10")
        try await store.close()
    }

    @Test("adding a passkey needs a recently verified session, also for an account without one; the addition grants no verification")
    func additionsNeedVerification() async throws {
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (first, cookie, _) = try await register(server, authenticator, username: "dana")
        // The account's only passkey stays: it is the account's only way in (red team: deleted, it
        // left the account, its name taken, with nobody able to sign in). Recently verified: a new
        // account's registration.
        let kept = try await server.request("/demo/credentials/\(Base64URL.encode(first))", cookie: cookie, method: "DELETE")
        #expect(kept.status == 409 && kept.errorMessage.hasPrefix("last_credential"), "\(kept.errorMessage)")
        #expect(try await server.request("/demo/credentials", cookie: cookie).json["credentials"]?.arrayValue?.count == 1)
        // An account without a passkey (deleted through the store, as an Apple-only account has none).
        let store = try await SQLiteStore.open(path: server.database)
        #expect(try await store.delete(id: first))
        try await store.close()
        // A stolen cookie, the window past: adding a passkey (the thief's own, with UV) is refused.
        try await ageSessions(server)
        let thief = Self.passkey()
        let (_, _, refused) = try await register(server, thief, username: "dana", cookie: cookie)
        #expect(refused.errorMessage.hasPrefix("reauthentication_required"), "\(refused.errorMessage)")
        #expect(try await server.request("/demo/session", cookie: cookie).json["recentlyVerified"]?.boolValue == false)
    }

    @Test("a passkey addition started before sign-out cannot be finished after it: the session's pending ceremonies end with it")
    func additionAfterSignOut() async throws {
        // Red team, fifth pass: the old cookie finished the addition after sign-out, stored the
        // passkey and signed in (unverified).
        let server = try await start()
        defer { server.stop() }
        let key = Self.passkey()
        let (id, cookie, _) = try await register(server, key, username: "erin")
        let options = try await server.request("/attestation/options", ["username": "erin"], cookie: cookie)
        #expect(options.ok, "\(options.errorMessage)")
        // Sign-out takes JSON only: a form from a sibling site cannot sign anyone out.
        let form = try await server.request("/demo/logout", cookie: cookie, raw: Array("x=1".utf8), contentType: "application/x-www-form-urlencoded")
        #expect(form.status == 415)
        #expect(try await server.request("/demo/session", cookie: cookie).json["user"]?.stringValue == "erin")
        let out = try await server.request("/demo/logout", [:], cookie: cookie)
        #expect(out.ok)
        let (_, result) = try await finish(server, options, Self.passkey(), cookie: cookie)
        #expect(!result.ok && result.errorMessage.hasPrefix("challenge_unknown"), "\(result.status) \(result.errorMessage)")
        #expect(try await server.request("/demo/session", cookie: result.cookie ?? cookie).json["user"] == .null)
        let again = try await signIn(server, key, username: "erin", id: id, verified: true)
        #expect(try await server.request("/demo/credentials", cookie: again).json["credentials"]?.arrayValue?.count == 1, "nothing was added")
    }

    @Test("deleting a passkey signs out the account's other sessions and ends their ceremonies; sign-out everywhere ends every session")
    func deletionEndsOtherSessions() async throws {
        // Red team, fifth pass: the owner deleted an intruder's passkey; the intruder's session
        // stayed signed in and verified, finished an addition it had started before, and signed in
        // with the passkey that addition stored.
        let server = try await start()
        defer { server.stop() }
        let owner = Self.passkey(), intruder = Self.passkey()
        let (ownerID, ownerCookie, _) = try await register(server, owner, username: "ivy")
        // The intruder holds a verified session of the account (a stolen cookie), adds a passkey
        // of its own and starts a second addition.
        let stolen = try await signIn(server, owner, username: "ivy", id: ownerID, verified: true)
        let (intruderID, intruderCookie, added) = try await register(server, intruder, username: "ivy", cookie: stolen)
        #expect(added.ok, "\(added.errorMessage)")
        let pending = try await server.request("/attestation/options", ["username": "ivy"], cookie: intruderCookie)
        #expect(pending.ok, "\(pending.errorMessage)")
        let deleted = try await server.request("/demo/credentials/" + Base64URL.encode(intruderID), cookie: ownerCookie, method: "DELETE")
        #expect(deleted.ok && deleted.json["otherSessionsEnded"]?.numberValue == 1, "\(deleted.json)")
        #expect(try await server.request("/demo/session", cookie: intruderCookie).json["user"] == .null, "the intruder is signed out")
        let (_, late) = try await finish(server, pending, Self.passkey(), cookie: intruderCookie)
        #expect(!late.ok && late.errorMessage.hasPrefix("challenge_unknown"), "\(late.status) \(late.errorMessage)")
        #expect(try await server.request("/attestation/options", ["username": "ivy"], cookie: intruderCookie).status == 409)
        // The owner's session goes on, as it was (same cookie, still verified).
        let mine = try await server.request("/demo/session", cookie: ownerCookie)
        #expect(mine.json["user"]?.stringValue == "ivy" && mine.json["recentlyVerified"]?.boolValue == true, "\(mine.json)")
        #expect(try await server.request("/demo/credentials", cookie: ownerCookie).json["credentials"]?.arrayValue?.count == 1)

        // Sign-out everywhere: a session signed in elsewhere ends too, and so does this one.
        let elsewhere = try await signIn(server, owner, username: "ivy", id: ownerID, verified: false)
        // Only a session that verified the user recently signs out everywhere: a stolen cookie that did
        // not cannot sign the owner out of every device (it may still sign itself out).
        let unverified = try await server.request("/demo/logout", ["everywhere": true], cookie: elsewhere)
        #expect(unverified.status == 401 && unverified.errorMessage.hasPrefix("reauthentication_required"), "\(unverified.status) \(unverified.errorMessage)")
        #expect(try await server.request("/demo/session", cookie: ownerCookie).json["user"]?.stringValue == "ivy")
        #expect(try await server.request("/demo/session", cookie: elsewhere).json["user"]?.stringValue == "ivy")
        let everywhere = try await server.request("/demo/logout", ["everywhere": true], cookie: ownerCookie)
        #expect(everywhere.ok && everywhere.json["sessionsEnded"]?.numberValue == 2 && everywhere.cookie?.hasSuffix("=") == true, "\(everywhere.json)")
        for cookie in [ownerCookie, elsewhere] {
            #expect(try await server.request("/demo/session", cookie: cookie).json["user"] == .null)
        }
        // Without a session it signs nobody out, and a plain sign-out still ends only its own.
        let one = try await signIn(server, owner, username: "ivy", id: ownerID, verified: false)
        let two = try await signIn(server, owner, username: "ivy", id: ownerID, verified: false)
        #expect(try await server.request("/demo/logout", ["everywhere": true]).json["sessionsEnded"] == nil)
        // A body that cannot be read is refused, not taken for a plain sign-out (red team, sixth pass).
        for raw in ["[1]", "{\"everywhere\": 1}", "{\"everywhere\": \"true\"}", "{", String(repeating: " ", count: 2000) + "{}"] {
            let refused = try await server.request("/demo/logout", cookie: two, raw: Array(raw.utf8))
            #expect(refused.status == 400 || refused.status == 413, "\(raw.prefix(20)): \(refused.status) \(refused.errorMessage)")
            #expect(try await server.request("/demo/session", cookie: two).json["user"]?.stringValue == "ivy", "\(raw.prefix(20))")
        }
        #expect(try await server.request("/demo/logout", cookie: one, raw: []).ok, "an empty body signs this session out")
        #expect(try await server.request("/demo/session", cookie: two).json["user"]?.stringValue == "ivy")
        #expect(try await server.request("/demo/session", cookie: one).json["user"] == .null)
    }

    @Test("the last two passkeys deleted at once: one goes, the other stays (last_credential)")
    func lastTwoAtOnce() async throws {
        let server = try await start()
        defer { server.stop() }
        let (first, cookie, _) = try await register(server, Self.passkey(), username: "gil")
        let (second, added, reply) = try await register(server, Self.passkey(), username: "gil", cookie: cookie)
        #expect(reply.ok, "\(reply.errorMessage)")
        // Eight requests for each at once: without one deletion at a time per account, two of
        // them read two passkeys, and both went.
        let replies = await withTaskGroup(of: ServeProcess.Reply?.self) { group in
            for id in Array(repeating: [first, second], count: 8).joined() {
                group.addTask { try? await server.request("/demo/credentials/\(Base64URL.encode(id))", cookie: added, method: "DELETE") }
            }
            return await group.reduce(into: [ServeProcess.Reply]()) { if let r = $1 { $0.append(r) } }
        }
        #expect(replies.count == 16 && replies.filter(\.ok).count == 1, "\(replies.map(\.errorMessage))")
        #expect(replies.allSatisfy { $0.ok || $0.errorMessage.hasPrefix("last_credential") || $0.errorMessage.hasPrefix("credential_unknown") })
        #expect(try await server.request("/demo/credentials", cookie: added).json["credentials"]?.arrayValue?.count == 1)
    }

    @Test("a passkey addition finished after its account was deleted stores nothing, and that passkey signs nobody in")
    func additionAfterDeletion() async throws {
        // Red team: the result after `DELETE /demo/account` answered 200 and left a credential
        // of no account, which still signed in through discoverable login.
        let server = try await start()
        defer { server.stop() }
        let (_, cookie, _) = try await register(server, Self.passkey(), username: "fay")
        let options = try await server.request("/attestation/options", ["username": "fay"], cookie: cookie)
        #expect(options.ok, "\(options.errorMessage)")
        let deleted = try await server.request("/demo/account", cookie: cookie, method: "DELETE")
        #expect(deleted.ok, "\(deleted.errorMessage)")
        let late = Self.passkey()
        let (parts, result) = try await finish(server, options, late, cookie: cookie)
        #expect(!result.ok && result.errorMessage.hasPrefix("challenge_unknown"), "\(result.status) \(result.errorMessage)")
        let signIn = try await server.request("/assertion/options", [:])
        let assertion = try late.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(signIn.json["challenge"]!.stringValue!)!, credentialId: parts.id)
        let refused = try await server.request("/assertion/result", assertion.json, cookie: signIn.cookie)
        #expect(refused.status == 401, "\(refused.status) \(refused.errorMessage)")
        #expect(try await server.request("/attestation/options", ["username": "fay"]).ok, "the name is free again")
    }

    @Test("a passkey addition started under a cookie since rotated, finished after the account's deletion, stores nothing")
    func additionAfterDeletionRotated() async throws {
        // Red team, second pass: two tabs start an addition; the first finishes (the cookie
        // rotates), the account is deleted, the second finishes with the old cookie: 200, and a
        // credential of no account that signed in.
        let server = try await start()
        defer { server.stop() }
        let (_, cookie, _) = try await register(server, Self.passkey(), username: "hal")
        let tab1 = try await server.request("/attestation/options", ["username": "hal"], cookie: cookie)
        let tab2 = try await server.request("/attestation/options", ["username": "hal"], cookie: cookie)
        #expect(tab1.ok && tab2.ok, "\(tab1.errorMessage) \(tab2.errorMessage)")
        let (_, first) = try await finish(server, tab1, Self.passkey(), cookie: cookie)
        #expect(first.ok && first.cookie != nil && first.cookie != cookie, "\(first.errorMessage)")
        let deleted = try await server.request("/demo/account", cookie: first.cookie, method: "DELETE")
        #expect(deleted.ok, "\(deleted.errorMessage)")
        let late = Self.passkey()
        let (parts, second) = try await finish(server, tab2, late, cookie: cookie)
        // The rotation ended the old session and the ceremonies pending under it.
        #expect(!second.ok && second.errorMessage.hasPrefix("challenge_unknown"), "\(second.status) \(second.errorMessage)")
        let signIn = try await server.request("/assertion/options", [:])
        let assertion = try late.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(signIn.json["challenge"]!.stringValue!)!, credentialId: parts.id)
        #expect(try await server.request("/assertion/result", assertion.json, cookie: signIn.cookie).status == 401)
    }

    @Test("a re-authentication by another account's credential does not count")
    func stepUpOtherAccount() async throws {
        let server = try await start()
        defer { server.stop() }
        let alice = Self.passkey(), mallory = Self.passkey()
        let (aliceID, _, _) = try await register(server, alice, username: "alice")
        let (malloryID, _, _) = try await register(server, mallory, username: "mallory")
        let cookie = try await signIn(server, alice, username: "alice", id: aliceID, verified: false)
        let options = try await server.request("/reauthentication/options", [:], cookie: cookie)
        let foreign = try mallory.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!, credentialId: malloryID)
        let reply = try await server.request("/reauthentication/result", foreign.json, cookie: cookie)
        #expect(!reply.ok)
        let refused = try await server.request("/demo/account", cookie: cookie, method: "DELETE")
        #expect(refused.errorMessage.hasPrefix("reauthentication_required"))
    }

    @Test("rename: the owner names a credential; a bad name or another account's credential is refused")
    func rename() async throws {
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (id, cookie, _) = try await register(server, authenticator, username: "alice")
        let (otherID, _, _) = try await register(server, Self.passkey(), username: "bob")
        let path = "/demo/credentials/\(Base64URL.encode(id))"
        let renamed = try await server.request(path, ["name": "  Work   laptop "], cookie: cookie, method: "PATCH")
        #expect(renamed.ok && renamed.json["name"]?.stringValue == "Work laptop", "\(renamed.errorMessage)")
        let list = try await server.request("/demo/credentials", cookie: cookie)
        let entry = list.json["credentials"]?.arrayValue?.first
        #expect(entry?["name"]?.stringValue == "Work laptop")
        let bad = try await server.request(path, ["name": .string("tab\tname")], cookie: cookie, method: "PATCH")
        #expect(bad.errorMessage.hasPrefix("credential_name_invalid"), "\(bad.errorMessage)")
        let long = try await server.request(path, ["name": .string(String(repeating: "x", count: 65))], cookie: cookie, method: "PATCH")
        #expect(long.errorMessage.hasPrefix("credential_name_invalid"), "\(long.errorMessage)")
        let foreign = try await server.request("/demo/credentials/\(Base64URL.encode(otherID))", ["name": "mine"], cookie: cookie, method: "PATCH")
        #expect(foreign.errorMessage.hasPrefix("credential_unknown"))
        let typed = try await server.request(path, ["name": 123], cookie: cookie, method: "PATCH")
        #expect(typed.errorMessage.hasPrefix("credential_name_invalid"), "\(typed.errorMessage)")
        #expect(try await server.request("/demo/credentials", cookie: cookie).json["credentials"]?.arrayValue?.first?["name"]?.stringValue == "Work laptop")
        let anonymous = try await server.request(path, ["name": "x"], method: "PATCH")
        #expect(anonymous.errorMessage.hasPrefix("sign_in_required"))
        let cleared = try await server.request(path, ["name": ""], cookie: cookie, method: "PATCH")
        #expect(cleared.ok && cleared.json["name"] == .null)
    }

    @Test("provider names: the community list names a known AAGUID with its icon; others fall back to Passkey or Security key")
    func providerNames() async throws {
        let server = try await start()
        defer { server.stop() }
        let (_, cookie, _) = try await register(server, Self.passkey(), username: "alice")
        let key = SoftwareAuthenticator(
            profile: .init(
                userVerified: true, backupEligible: false, backedUp: false, counterStep: 1, aaguid: [UInt8](repeating: 0x42, count: 16),
                attachment: .crossPlatform, transports: [.usb]))
        // A second credential needs a verified session: the new account's registration gave it.
        let (_, cookie2, added) = try await register(server, key, username: "alice", cookie: cookie)
        #expect(added.ok, "\(added.errorMessage)")
        let list = try await server.request("/demo/credentials", cookie: cookie2)
        let entries = list.json["credentials"]?.arrayValue ?? []
        #expect(entries.count == 2)
        #expect(entries.first?["provider"]?.stringValue == "iCloud Keychain" && entries.first?["providerSource"]?.stringValue == "provider-list")
        #expect(entries.first?["iconLight"]?.stringValue?.hasPrefix("data:image/svg+xml;base64,") == true)
        #expect(entries.first?["synced"]?.boolValue == true)
        #expect(entries.last?["provider"]?.stringValue == "Security key" && entries.last?["providerSource"]?.stringValue == "fallback")
        #expect(entries.last?["synced"]?.boolValue == false)
        let session = try await server.request("/demo/session", cookie: cookie2)
        #expect(session.json["providerList"]?.intValue == 5)
    }

    @Test("the provider list loader: bounded, malformed entries skipped, only image data URIs kept; the real list when it is beside the checkout")
    func providerList() throws {
        let sample = try PasskeyProviderList.load(path: Self.providerSample)
        #expect(sample.providers.count == 5 && sample.skipped == 2)
        #expect(sample.providers[AAGUID("bada5566-a7aa-401f-bd96-45619a55120d")!]?.iconLight == nil, "a tracker URL must not pass as an icon")
        #expect(throws: WebAuthnError.self) { try PasskeyProviderList(json: Array("[1,2]".utf8)) }
        #expect(throws: WebAuthnError.self) { try PasskeyProviderList(json: [UInt8](repeating: 0x20, count: PasskeyProviderList.maxSize + 1)) }
        #expect(try PasskeyProviderList(json: Array("{}".utf8)).isEmpty)
        // Names that display as something else are skipped: bidi overrides and isolates, zero-width
        // characters, line separators, other spaces, private use; accented letters and other scripts pass.
        let names = [
            "Pass\u{202E}yek", "\u{2067}Keychain", "i\u{200B}Cloud Keychain", "Bit\u{200D}warden", "One\u{2028}Two", "No\u{00A0}Break",
            "Private\u{E000}", "Ab\u{FEFF}", "iCloud\u{FE0F} Keychain", "iCl\u{034F}oud", "iCloud\u{3164}Keychain", "iCloud \u{115F}Keychain",
            "iCloud\u{17B4} Keychain", "iCloud\u{2800}Keychain", "\u{0301}\u{0302}", "q" + String(repeating: "\u{0301}", count: 5),
            "Zq\u{0301}\u{0302}\u{0303}\u{0304}lgo", " Lead", "Two  Spaces", "\u{1D159}\u{1D159}", "iCloud\u{1D159}Keychain",
            "iCloud\u{16FE4}Keychain",
            "Café Pass", "Пароли", "1Password", "Ấp",
        ]
        var object = JSONObject()
        for (i, name) in names.enumerated() {
            object[String(format: "00000000-0000-0000-0000-%012d", i + 1)] = .object(["name": .string(name)])
        }
        let filtered = try PasskeyProviderList(json: JSONValue.object(object).serializedBytes())
        #expect(Set(filtered.providers.values.map(\.name)) == ["Café Pass", "Пароли", "1Password", "Zq\u{0301}\u{0302}\u{0303}\u{0304}lgo", "Ấp"])
        #expect(filtered.skipped == names.count - 5)
        #expect(!PasskeyProvider.isDisplayableName("") && !PasskeyProvider.isDisplayableName(String(repeating: "a", count: 65)))
        let shared = Self.repository.deletingLastPathComponent().appendingPathComponent("shared/data/passkey-provider-aaguids.json").path
        if FileManager.default.fileExists(atPath: shared) {
            let real = try PasskeyProviderList.load(path: shared)
            // (Apple's entry is named "Apple Passwords" there since 2025.)
            #expect(real.providers[AAGUID("ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4")!]?.name == "Google Password Manager")
            #expect(real.providers[AAGUID(bytes: Self.iCloudKeychain)!] != nil)
            #expect(real.providers.count >= 40)
        }
    }

    @Test("the provider list from its URL: fetched, cached, kept on failure; served by webauthn serve from the URL and, offline, from the cache")
    func providerListFromURL() async throws {
        let script = MetadataServiceTests.Script()
        let sample = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.providerSample)))
        script.set(.respond(status: 200, headers: [("Content-Type", "application/json")], body: sample))
        let standIn = try MetadataServiceTests.standIn(script)
        defer { standIn.stop() }
        let url = standIn.url.appendingPathComponent("aaguid.json")
        let cache = MetadataServiceTests.temporaryDirectory() + "-providers.json"
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let directory = PasskeyProviderDirectory()
        #expect(try await directory.refresh(from: url, cache: cache).providers.count == 5)
        #expect(try PasskeyProviderList.load(path: cache).providers.count == 5, "the cache holds the list")
        script.set(.respond(status: 500, headers: [], body: []))
        await #expect(throws: WebAuthnError.self) { try await directory.refresh(from: url) }
        script.set(.respond(status: 200, headers: [], body: Array("not json".utf8)))
        await #expect(throws: WebAuthnError.self) { try await directory.refresh(from: url) }
        #expect(directory.list.providers.count == 5, "a failed refresh kept the list")
        await #expect(throws: WebAuthnError.self) { try await directory.refresh(from: URL(string: "http://example.com/aaguid.json")!) }
        // A retired list (an empty object) is installed, and reported by isEmpty.
        script.set(.respond(status: 200, headers: [], body: Array("{}".utf8)))
        #expect(try await directory.refresh(from: url).isEmpty && directory.list.isEmpty)
        // The server: from the URL, then with the URL failing, from the cache.
        script.set(.respond(status: 200, headers: [], body: sample))
        let online = try await ServeProcess(
            database: ServeProcess.temporaryDatabase(), extra: ["--passkey-providers", url.absoluteString, "--passkey-providers-cache", cache])
        defer { online.stop() }
        let (_, cookie, _) = try await register(online, Self.passkey(), username: "alice")
        var count = 0
        for _ in 0..<100 {
            count = try await online.request("/demo/session", cookie: cookie).json["providerList"]?.intValue ?? 0
            if count == 5 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(count == 5)
        online.stop()
        script.set(.respond(status: 503, headers: [], body: []))
        let offline = try await ServeProcess(
            database: ServeProcess.temporaryDatabase(), extra: ["--passkey-providers", url.absoluteString, "--passkey-providers-cache", cache])
        defer { offline.stop() }
        let (_, cookie2, _) = try await register(offline, Self.passkey(), username: "bob")
        #expect(try await offline.request("/demo/session", cookie: cookie2).json["providerList"]?.intValue == 5)
    }

    @Test("Signals: an unknown credential's sign-in answers signalUnknownCredential; a display-name change answers signalCurrentUserDetails")
    func signals() async throws {
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (id, cookie, _) = try await register(server, authenticator, username: "alice")
        // A credential the server never saw (the provider still holds it, say, after a deletion elsewhere).
        let stray = Self.passkey()
        let options = try await server.request("/assertion/options", [:])
        let parts0 = try stray.register(rpId: rpId, origin: origin, challenge: SecureRandom.bytes(32), userHandle: [1])
        let assertion = try stray.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!, credentialId: parts0.id)
        let unknown = try await server.request("/assertion/result", assertion.json, cookie: options.cookie)
        #expect(unknown.errorMessage.hasPrefix("authentication_failed"))
        #expect(unknown.json["signal"]?["method"]?.stringValue == "signalUnknownCredential")
        #expect(unknown.json["signal"]?["options"]?["credentialId"]?.stringValue == Base64URL.encode(parts0.id))
        // A name without an account gets stand-in credential IDs; a sign-in with one is answered as
        // a real credential's would be: no signal, or the signal would reveal that the name is free.
        let stranger = try await server.request("/assertion/options", ["username": "nobody-here"])
        let standIn = try #require(stranger.json["allowCredentials"]?.arrayValue?.first?["id"]?.stringValue.flatMap(Base64URL.decode))
        let forged = try stray.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(stranger.json["challenge"]!.stringValue!)!, credentialId: parts0.id)
        var forgedJSON = forged.json.objectValue!
        forgedJSON["id"] = .string(Base64URL.encode(standIn))
        forgedJSON["rawId"] = .string(Base64URL.encode(standIn))
        let probe = try await server.request("/assertion/result", .object(forgedJSON), cookie: stranger.cookie)
        #expect(probe.errorMessage.hasPrefix("authentication_failed") && probe.json["signal"] == nil, "\(probe.json)")
        // A known credential with a bad signature says nothing of the kind.
        let options2 = try await server.request("/assertion/options", [:])
        var bad = try authenticator.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options2.json["challenge"]!.stringValue!)!, credentialId: id)
        bad.signature[bad.signature.count - 1] ^= 1
        let failed = try await server.request("/assertion/result", bad.json, cookie: options2.cookie)
        #expect(failed.errorMessage.hasPrefix("authentication_failed") && failed.json["signal"] == nil)
        let renamed = try await server.request("/demo/account", ["displayName": "Alice Liddell"], cookie: cookie, method: "PATCH")
        #expect(renamed.ok, "\(renamed.errorMessage)")
        #expect(renamed.json["signal"]?["method"]?.stringValue == "signalCurrentUserDetails")
        #expect(renamed.json["signal"]?["options"]?["displayName"]?.stringValue == "Alice Liddell")
        #expect(renamed.json["signal"]?["options"]?["name"]?.stringValue == "alice")
        let session = try await server.request("/demo/session", cookie: cookie)
        #expect(session.json["displayName"]?.stringValue == "Alice Liddell")
    }

    @Test("conditional create: a registration without user presence is accepted only for the signed-in owner who asked for it")
    func conditionalCreate() async throws {
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (_, cookie, _) = try await register(server, authenticator, username: "alice")
        let noPresence: (inout RegistrationParts) -> Void = { $0.authenticatorData.flags.remove(.userPresent) }
        let quiet = try await register(server, authenticator, username: "alice", cookie: cookie, extra: ["mediation": "conditional"], change: noPresence)
        #expect(quiet.reply.ok, "\(quiet.reply.errorMessage)")
        // Without asking for conditional mediation, presence is required.
        let loud = try await register(server, authenticator, username: "alice", cookie: quiet.cookie, change: noPresence)
        #expect(loud.reply.errorMessage.hasPrefix("user_presence_missing"), "\(loud.reply.errorMessage)")
        // A stranger asking for conditional create on a new name gets ordinary options.
        let stranger = try await register(server, authenticator, username: "carol", extra: ["mediation": "conditional"], change: noPresence)
        #expect(stranger.reply.errorMessage.hasPrefix("user_presence_missing"), "\(stranger.reply.errorMessage)")
    }

    @Test("hints and attestationFormats pass through typed; unknown values are dropped")
    func hints() async throws {
        let server = try await start()
        defer { server.stop() }
        let options = try await server.request(
            "/attestation/options", ["username": "dora", "hints": ["security-key", "telepathy", "hybrid"], "attestationFormats": ["packed", "x", "tpm"]])
        #expect(options.json["hints"]?.arrayValue?.compactMap(\.stringValue) == ["security-key", "hybrid"])
        #expect(options.json["attestationFormats"]?.arrayValue?.compactMap(\.stringValue) == ["packed", "tpm"])
        // Sign-in options take hints the same way (they were ignored: red team, twenty-sixth pass).
        let signIn = try await server.request("/assertion/options", ["hints": ["client-device", "telepathy", "security-key"]])
        #expect(signIn.json["hints"]?.arrayValue?.compactMap(\.stringValue) == ["client-device", "security-key"])
        let none = try await server.request("/assertion/options", [:])
        #expect(none.ok && none.json["hints"]?.arrayValue?.isEmpty == true, "\(none.json)")
    }
}
