internal import Foundation
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension CaseList {
    /// Server-ServerAuthenticatorAssertionResponse-Resp-1 to -3, API-AssertionJSON and the L3 §7.2 steps.
    func assertionCases() {
        let r = self.r, asr = Self.asr

        let passkey: @Sendable () -> SoftwareAuthenticator = { SoftwareAuthenticator(profile: .platformPasskey) }
        let response = Edits.inResponse
        assertion("\(asr)-Resp-1 P-1", "a well-formed assertion verifies", passes: true)
        for (n, intent, edit) in Self.credentialShapeDefects() {
            assertion("\(asr)-Resp-1 F-\(n)", intent, passes: false, json: edit)
        }
        assertion("\(asr)-Resp-1 F-12", "an assertion without authenticatorData fails", passes: false, json: response(Edits.without("authenticatorData")))
        assertion(
            "\(asr)-Resp-1 F-13", "an authenticatorData that is not a string fails", passes: false, json: response(Edits.setting("authenticatorData", ["x"])))
        assertion(
            "\(asr)-Resp-1 F-14", "an authenticatorData that is not base64url fails", passes: false, json: response(Edits.setting("authenticatorData", "!!!")))
        assertion("\(asr)-Resp-1 F-15", "an empty authenticatorData fails", passes: false, json: response(Edits.setting("authenticatorData", "")))
        assertion("\(asr)-Resp-1 F-16", "an assertion without signature fails", passes: false, json: response(Edits.without("signature")))
        assertion("\(asr)-Resp-1 F-17", "a signature that is not a string fails", passes: false, json: response(Edits.setting("signature", 9)))
        assertion("\(asr)-Resp-1 F-18", "a signature that is not base64url fails", passes: false, json: response(Edits.setting("signature", "!!!")))
        assertion("\(asr)-Resp-1 F-19", "an empty signature fails", passes: false, json: response(Edits.setting("signature", "")))
        assertion(
            "\(asr)-Resp-1 F-20", "a signature that does not verify fails", passes: false, resign: false, edit: { $0.signature[$0.signature.count / 2] ^= 1 })
        assertion("\(asr)-Resp-1 F-21", "a userHandle that is not a string fails", passes: false, json: response(Edits.setting("userHandle", 5)))
        assertion("API-AssertionJSON F-1", "an empty id fails", passes: false, json: Edits.setting("id", ""))
        for (n, intent, edit) in Self.clientDataDefects(expectedType: "webauthn.get") {
            assertion("\(asr)-Resp-2 F-\(n)", intent, passes: false, edit: { edit(&$0.clientData, &$0.clientDataOverride) })
        }
        assertion(
            "L3-5.8.1 P-2", "an assertion whose clientData tokenBinding is not an object verifies (reserved in L3; the list's Resp-2 F-15 expects a failure)",
            passes: true, edit: { $0.clientData.extraJSON = #""tokenBinding":"unused""# })
        add("\(asr)-Resp-3 P-1", "an authenticator without a counter (always 0) signs in again and again") {
            let (c, name, key, credential) = try await r.registered(passkey())
            for _ in 0..<2 {
                let (reply, _) = try await r.signIn(c, username: name, authenticator: key, credential: credential)
                try check(reply.ok, reply.message)
            }
        }
        assertion("\(asr)-Resp-3 P-2", "UV set when userVerification is required verifies", passes: true, key: passkey, userVerification: "required")
        assertion(
            "\(asr)-Resp-3 P-3", "UP and UV set when userVerification is required verifies", passes: true, userVerification: "required",
            edit: { $0.authenticatorData.flags.formUnion([.userPresent, .userVerified]) })
        assertion("\(asr)-Resp-3 P-5", "UP set with userVerification discouraged verifies", passes: true, userVerification: "discouraged")
        assertion("\(asr)-Resp-3 P-6", "UV set despite userVerification discouraged verifies", passes: true, key: passkey, userVerification: "discouraged")
        assertion(
            "\(asr)-Resp-3 P-8", "authenticator extension data with ED set verifies", passes: true,
            edit: { $0.authenticatorData.extensions = .map([CBORPair(.text("example.extension"), .text("test"))]) })
        assertion("\(asr)-Resp-3 F-1", "authenticatorData with leftover bytes fails", passes: false, edit: { $0.authenticatorData.trailing = [0] })
        assertion(
            "\(asr)-Resp-3 F-2", "a wrong rpIdHash fails", passes: false,
            edit: { $0.authenticatorData.rpIdHash = Digest.sha256(Array("attacker.example".utf8)) })
        assertion(
            "\(asr)-Resp-3 F-3", "a signature over another clientDataHash fails", passes: false, resign: false,
            edit: { $0.clientData.extraJSON = #""x":1"# })
        add("\(asr)-Resp-3 F-4", "a counter that does not increase fails (once it is non-zero)") {
            let (c, name, key, credential) = try await r.registered()
            let (first, parts) = try await r.signIn(c, username: name, authenticator: key, credential: credential)
            try check(first.ok, first.message)
            let count = parts.authenticatorData.signCount
            let (again, _) = try await r.signIn(c, username: name, authenticator: key, credential: credential) { $0.authenticatorData.signCount = count }
            try check(again.failedProperly, "a repeated counter was accepted: \(again.status) \(again.message)")
        }
        assertion("\(asr)-Resp-3 F-5", "UP without UV when userVerification is required fails", passes: false, userVerification: "required")

        assertion(
            "L3-7.2-16 F-1", "UP clear fails (the list's Resp-3 P-4/P-7 expect success; L3 §7.2 step 16 requires UP)", passes: false,
            edit: { $0.authenticatorData.flags.remove(.userPresent) })
        add("L3-7.2-11 F-1", "a replayed assertion fails") {
            let (c, name, key, credential) = try await r.registered()
            let (first, parts) = try await r.signIn(c, username: name, authenticator: key, credential: credential)
            try check(first.ok, first.message)
            let replay = try await c.post("/assertion/result", parts.conformanceJSON)
            try check(replay.failedProperly, "replay accepted: \(replay.status) \(replay.message)")
        }
        assertion("L3-7.2-6 F-1", "a userHandle of another account fails", passes: false, edit: { $0.userHandle = Array("someone-else".utf8) })
        add("L3-7.2-6 P-1", "a discoverable login with a synced passkey (counter 0, BE/BS) verifies, twice") {
            let (_, _, key, credential) = try await r.registered(passkey())
            for _ in 0..<2 {
                let (reply, _) = try await r.signIn(r.client(), username: nil, authenticator: key, credential: credential)
                try check(reply.ok, reply.message)
            }
        }
        add("L3-7.2-6 F-2", "a discoverable login without a userHandle fails") {
            let (_, _, key, credential) = try await r.registered()
            let (reply, _) = try await r.signIn(r.client(), username: nil, authenticator: key, credential: credential) { $0.userHandle = nil }
            try check(reply.failedProperly, "expected a failure: \(reply.status) \(reply.message)")
        }
        assertion("L3-7.2-18 F-1", "BS without BE fails", passes: false, edit: { $0.authenticatorData.flags.insert(.backupState) })
        assertion("L3-7.2-19 F-1", "BE that changed since registration fails", passes: false, edit: { $0.authenticatorData.flags.insert(.backupEligible) })
    }
}
