@_spi(Testing) import WebAuthnCore
import WebAuthnTesting

/// The cases, numbered after the FIDO Alliance's server test list
/// (Server-<structure>-Req/Resp-<n>, P- must pass, F- must fail), plus
/// cases for WebAuthn L3 steps that list predates (prefix L3-).
/// Docs/Conformance.md holds the intent of each and the current results.
enum ConformanceCases {
    static func all(_ r: ConformanceRunner) -> [ConformanceCase] {
        var cases: [ConformanceCase] = []
        func add(_ id: String, _ intent: String, _ run: @escaping @Sendable () async throws -> Void) {
            cases.append(ConformanceCase(id: id, intent: intent, run: run))
        }
        let creation = "Server-ServerPublicKeyCredentialCreationOptions-Req-1"
        let attestation = "Server-ServerAuthenticatorAttestationResponse"
        let get = "Server-ServerPublicKeyCredentialGetOptions-Req-1"
        let assertion = "Server-ServerAuthenticatorAssertionResponse"

        // MARK: Creation options

        add("\(creation) P-1", "options carry status ok, rp.id, a base64url user.id and challenge (≥16 bytes), pubKeyCredParams with ES256, EdDSA, RS256, a timeout") {
            let o = try await r.client().post("/attestation/options", ["username": .string(r.uniqueName("req1")), "displayName": "Req One", "attestation": "none"])
            try check(o.ok && o["errorMessage"]?.stringValue == "", "status/errorMessage: \(o.message)")
            try check(o["rp"]?["id"]?.stringValue == r.rpId, "rp.id is \(o["rp"]?["id"]?.serialized() ?? "missing")")
            try check(o["user"]?["name"]?.stringValue != nil && o["user"]?["displayName"]?.stringValue == "Req One", "user.name/displayName")
            try check((o["user"]?["id"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) > 0, "user.id is not base64url")
            try check((o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) >= 16, "challenge is not base64url of ≥16 bytes")
            let algs = Set(o["pubKeyCredParams"]?.arrayValue?.compactMap { $0["alg"]?.intValue } ?? [])
            try check(algs.isSuperset(of: [-7, -8, -257]), "pubKeyCredParams lacks ES256/EdDSA/RS256: \(algs)")
            try check((o["timeout"]?.intValue ?? 0) > 0, "timeout is missing")
        }
        add("\(creation) P-2", "authenticatorSelection, attestation and extensions are echoed") {
            let o = try await r.client().post("/attestation/options", [
                "username": .string(r.uniqueName("req2")), "displayName": "x", "attestation": "direct", "extensions": ["credProps": true],
                "authenticatorSelection": ["requireResidentKey": true, "authenticatorAttachment": "platform", "userVerification": "required"],
            ])
            try check(o.ok, o.message)
            try check(o["attestation"]?.stringValue == "direct", "attestation not echoed")
            try check(o["authenticatorSelection"]?["authenticatorAttachment"]?.stringValue == "platform", "authenticatorAttachment not echoed")
            try check(o["authenticatorSelection"]?["requireResidentKey"]?.boolValue == true, "requireResidentKey not echoed")
            try check(o["authenticatorSelection"]?["userVerification"]?.stringValue == "required", "userVerification not echoed")
            try check(o["extensions"]?["credProps"]?.boolValue == true, "extensions not echoed")
        }
        add("\(creation) P-3", "a user's registered credentials are listed in excludeCredentials") {
            let c = r.client(), name = r.uniqueName("req3"), key = r.securityKey()
            let (reply, parts) = try await r.register(c, username: name, authenticator: key)
            try check(reply.ok, reply.message)
            let o = try await c.post("/attestation/options", ["username": .string(name), "displayName": "x"])
            let excluded = o["excludeCredentials"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            try check(excluded.contains(Base64URL.encode(parts.id)), "excludeCredentials: \(excluded)")
        }
        add("\(creation) F-1", "options without a username fail") {
            let o = try await r.client().post("/attestation/options", ["displayName": "x"])
            try check(o.failedProperly, "expected a failure: \(o.status) \(o.message)")
        }

        // MARK: Attestation responses

        func registrationFails(_ id: String, _ intent: String, attestation a: SoftwareAuthenticator.Attestation = .none,
                               edit: @escaping @Sendable (inout RegistrationParts) throws -> Void) {
            add(id, intent) {
                let (reply, _) = try await r.register(r.client(), username: r.uniqueName("f"), authenticator: r.securityKey(), attestation: a, edit: edit)
                try check(reply.failedProperly, "expected a failure: \(reply.status) \(reply.message)")
            }
        }
        func registrationPasses(_ id: String, _ intent: String, algorithm: COSEAlgorithm = .es256, attestation a: SoftwareAuthenticator.Attestation = .none) {
            add(id, intent) {
                let (reply, _) = try await r.register(r.client(), username: r.uniqueName("p"), authenticator: r.securityKey(), algorithm: algorithm, attestation: a)
                try check(reply.ok, reply.message)
            }
        }
        registrationPasses("\(attestation)-Resp-1 P-1", "a well-formed none registration verifies")
        registrationFails("\(attestation)-Resp-1 F-1", "a credential id that is not base64url fails") { $0.id = [] }
        registrationFails("\(attestation)-Resp-2 F-1", "clientData.type webauthn.get fails") { $0.clientData.type = "webauthn.get" }
        registrationFails("\(attestation)-Resp-2 F-2", "a challenge other than the issued one fails") { $0.clientData.challenge = SecureRandom.bytes(32) }
        registrationFails("\(attestation)-Resp-2 F-3", "an origin other than the RP's fails") { $0.clientData.origin = "https://attacker.example" }
        registrationFails("\(attestation)-Resp-2 F-4", "clientDataJSON that is not JSON fails") { $0.clientDataOverride = Array("not json".utf8) }
        registrationFails("\(attestation)-Resp-3 F-1", "an attestationObject that is not CBOR fails") { $0.attestationObjectOverride = [0xff, 0x00] }
        registrationFails("\(attestation)-Resp-3 F-2", "an unknown fmt fails") { $0.format = "not-a-format" }
        registrationPasses("\(attestation)-Resp-4 P-1", "an ES256 credential verifies", algorithm: .es256)
        registrationPasses("\(attestation)-Resp-4 P-2", "an EdDSA credential verifies", algorithm: .edDSA)
        registrationPasses("\(attestation)-Resp-4 P-3", "an RS256 credential verifies", algorithm: .rs256)
        add("L3-7.1-20 F-1", "a credential whose algorithm the server did not offer in pubKeyCredParams fails") {
            let c = r.client()
            let offered = try await c.post("/attestation/options", ["username": .string(r.uniqueName("alg"))])
            let algs = Set(offered["pubKeyCredParams"]?.arrayValue?.compactMap { $0["alg"]?.intValue } ?? [])
            guard let alg = [COSEAlgorithm.rs384, .es512, .es384, .ps384, .rs512].first(where: { !algs.contains($0.rawValue) }) else {
                throw CaseFailure("the server offers every algorithm the runner can make; nothing to refuse")
            }
            let (reply, _) = try await r.register(c, username: r.uniqueName("alg"), authenticator: r.securityKey(), algorithm: alg)
            try check(reply.failedProperly, "\(alg) was not offered but accepted: \(reply.status) \(reply.message)")
        }
        registrationFails("\(attestation)-Resp-5 F-1", "a wrong rpIdHash fails") { $0.authenticatorData.rpIdHash = Digest.sha256(Array("attacker.example".utf8)) }
        registrationFails("\(attestation)-Resp-5 F-2", "UP clear fails") { $0.authenticatorData.flags.remove(.userPresent) }
        registrationFails("\(attestation)-Resp-5 F-3", "AT clear fails") { $0.authenticatorData.flags.remove(.attestedCredentialData); $0.authenticatorData.attested = nil }
        registrationFails("\(attestation)-Resp-5 F-4", "trailing bytes after authenticator data fail") { $0.authenticatorData.trailing = [0] }
        registrationPasses("\(attestation)-Resp-6 P-1", "packed self attestation verifies", attestation: .packedSelf)
        registrationPasses("\(attestation)-Resp-6 P-2", "packed full attestation chaining to the metadata root verifies", attestation: r.packedFull)
        registrationFails("\(attestation)-Resp-6 F-1", "a packed signature over other data fails", attestation: .packedSelf) { $0.authenticatorData.signCount = 77 }
        registrationFails("\(attestation)-Resp-6 F-2", "a packed x5c from an untrusted root fails when trust is required",
                          attestation: try! Self.untrustedPacked()) { _ in }
        func formatFails(_ id: String, _ intent: String, _ a: SoftwareAuthenticator.Attestation, defect: SoftwareAuthenticator.StatementDefect? = nil,
                         edit: @escaping @Sendable (inout RegistrationParts) throws -> Void = { _ in }) {
            add(id, intent) {
                let (reply, _) = try await r.register(r.client(), username: r.uniqueName("f"), authenticator: r.securityKey(), attestation: a,
                                                      defect: defect, edit: edit)
                try check(reply.failedProperly, "expected a failure: \(reply.status) \(reply.message)")
            }
        }
        let authority = r.pki.authority
        registrationPasses("\(attestation)-Resp-8 P-1", "fido-u2f attestation chaining to the metadata root (matched by key identifier) verifies", attestation: .fidoU2F(authority))
        formatFails("\(attestation)-Resp-8 F-1", "fido-u2f with a non-zero AAGUID fails", .fidoU2F(authority)) { $0.authenticatorData.attested?.aaguid = SecureRandom.bytes(16) }
        formatFails("\(attestation)-Resp-8 F-2", "fido-u2f signed over another credential id fails", .fidoU2F(authority)) { parts in
            // The statement stays signed over the original credential id.
            let other = SecureRandom.bytes(32)
            parts.id = other
            parts.authenticatorData.attested?.credentialId = other
        }
        registrationPasses("\(attestation)-Resp-9 P-1", "tpm attestation (ECC pubArea, AIK certificate) verifies", attestation: .tpm(authority))
        registrationPasses("\(attestation)-Resp-9 P-2", "tpm attestation with an RSA pubArea (RS256 credential) verifies", algorithm: .rs256, attestation: .tpm(authority))
        formatFails("\(attestation)-Resp-9 F-1", "tpm with certInfo.extraData not the hash of authData ‖ clientDataHash fails", .tpm(authority), defect: .wrongExtraData)
        formatFails("\(attestation)-Resp-9 F-2", "tpm with an AIK certificate lacking tcg-kp-AIKCertificate fails", .tpm(authority), defect: .aikWithoutEKU)
        registrationPasses("\(attestation)-Resp-A P-1", "android-key attestation verifies", attestation: .androidKey(authority))
        formatFails("\(attestation)-Resp-A F-1", "android-key with an attestationChallenge other than clientDataHash fails", .androidKey(authority), defect: .wrongChallenge)
        formatFails("\(attestation)-Resp-A F-2", "android-key with allApplications fails", .androidKey(authority), defect: .allApplications)
        registrationPasses("\(attestation)-Resp-C P-1", "apple anonymous attestation verifies", attestation: .apple(authority))
        formatFails("\(attestation)-Resp-C F-1", "apple with a nonce other than SHA-256(authData ‖ clientDataHash) fails", .apple(authority), defect: .wrongNonce)
        registrationPasses("\(attestation)-Resp-7 P-1", "none attestation verifies")
        registrationFails("\(attestation)-Resp-7 F-1", "none with a non-empty attStmt fails") { $0.statement = .map([CBORPair(.text("sig"), .bytes([1]))]) }

        // MARK: Get options and assertions

        add("\(get) P-1", "request options carry status ok, a challenge, rpId and the user's allowCredentials") {
            let c = r.client(), name = r.uniqueName("get1"), key = r.securityKey()
            let (reply, parts) = try await r.register(c, username: name, authenticator: key)
            try check(reply.ok, reply.message)
            let o = try await c.post("/assertion/options", ["username": .string(name), "userVerification": "discouraged"])
            try check(o.ok, o.message)
            try check((o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) >= 16, "challenge")
            try check(o["rpId"]?.stringValue == r.rpId, "rpId")
            try check(o["allowCredentials"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.contains(Base64URL.encode(parts.id)) == true, "allowCredentials")
            try check(o["userVerification"]?.stringValue == "discouraged", "userVerification not echoed")
        }
        add("\(get) P-2", "request options without a username start a discoverable login") {
            let o = try await r.client().post("/assertion/options", [:])
            try check(o.ok && (o["allowCredentials"]?.arrayValue ?? []).isEmpty, o.message)
        }
        add("\(get) F-1", "request options for an unknown username fail") {
            let o = try await r.client().post("/assertion/options", ["username": .string(r.uniqueName("nobody"))])
            try check(o.failedProperly, "expected a failure: \(o.status) \(o.message)")
        }

        /// A registered credential and a client that holds its session.
        @Sendable func registered(_ attestation: SoftwareAuthenticator.Attestation = .none, profile: SoftwareAuthenticator? = nil) async throws -> (ConformanceRunner.Client, String, SoftwareAuthenticator, [UInt8]) {
            let c = r.client(), name = r.uniqueName("user"), key = profile ?? r.securityKey()
            let (reply, parts) = try await r.register(c, username: name, authenticator: key, attestation: attestation)
            try check(reply.ok, "registration: \(reply.message)")
            return (c, name, key, parts.id)
        }
        func assertionFails(_ id: String, _ intent: String, resign: Bool = true, edit: @escaping @Sendable (inout AssertionParts) throws -> Void) {
            add(id, intent) {
                let (c, name, key, credential) = try await registered()
                let (reply, _) = try await r.signIn(c, username: name, authenticator: key, credential: credential, resign: resign, edit: edit)
                try check(reply.failedProperly, "expected a failure: \(reply.status) \(reply.message)")
            }
        }
        add("\(assertion)-Resp-1 P-1", "a well-formed assertion verifies; the counter rises") {
            let (c, name, key, credential) = try await registered()
            for _ in 0..<2 {
                let (reply, _) = try await r.signIn(c, username: name, authenticator: key, credential: credential)
                try check(reply.ok, reply.message)
            }
        }
        assertionFails("\(assertion)-Resp-1 F-1", "a credential id that is not base64url fails", resign: false) { $0.id = [] }
        assertionFails("\(assertion)-Resp-2 F-1", "clientData.type webauthn.create fails") { $0.clientData.type = "webauthn.create" }
        assertionFails("\(assertion)-Resp-2 F-2", "a challenge other than the issued one fails") { $0.clientData.challenge = SecureRandom.bytes(32) }
        assertionFails("\(assertion)-Resp-2 F-3", "an origin other than the RP's fails") { $0.clientData.origin = "https://attacker.example" }
        assertionFails("\(assertion)-Resp-3 F-1", "a wrong rpIdHash fails") { $0.authenticatorData.rpIdHash = Digest.sha256(Array("attacker.example".utf8)) }
        assertionFails("\(assertion)-Resp-3 F-2", "UP clear fails") { $0.authenticatorData.flags.remove(.userPresent) }
        add("\(assertion)-Resp-3 F-3", "a counter that does not rise fails (after the counter became non-zero)") {
            let (c, name, key, credential) = try await registered()
            let (first, parts) = try await r.signIn(c, username: name, authenticator: key, credential: credential)
            try check(first.ok, first.message)
            let count = parts.authenticatorData.signCount
            let (again, _) = try await r.signIn(c, username: name, authenticator: key, credential: credential) { $0.authenticatorData.signCount = count }
            try check(again.failedProperly, "a repeated counter was accepted: \(again.status) \(again.message)")
        }
        assertionFails("\(assertion)-Resp-4 F-1", "a signature that does not verify fails", resign: false) { $0.signature[$0.signature.count / 2] ^= 1 }
        add("\(assertion)-Resp-4 F-2", "a replayed assertion fails") {
            let (c, name, key, credential) = try await registered()
            let (first, parts) = try await r.signIn(c, username: name, authenticator: key, credential: credential)
            try check(first.ok, first.message)
            let replay = try await c.post("/assertion/result", ConformanceRunner.conformanceShape(parts.json))
            try check(replay.failedProperly, "replay accepted: \(replay.status) \(replay.message)")
        }

        // MARK: Beyond the FIDO list (WebAuthn L3)

        assertionFails("L3-7.2-6 F-1", "a userHandle of another account fails") { $0.userHandle = Array("someone-else".utf8) }
        assertionFails("L3-7.2-18 F-1", "BS without BE fails") { $0.authenticatorData.flags.insert(.backupState) }
        assertionFails("L3-7.2-19 F-1", "BE that changed since registration fails") { $0.authenticatorData.flags.insert(.backupEligible) }
        registrationFails("L3-7.1-17 F-1", "a registration with BS but no BE fails") { $0.authenticatorData.flags.insert(.backupState) }
        add("L3-7.2-6 P-1", "a discoverable login with a synced passkey (counter 0, BE/BS) verifies, twice") {
            let (_, _, key, credential) = try await registered(profile: SoftwareAuthenticator(profile: .platformPasskey))
            for _ in 0..<2 {
                let (reply, _) = try await r.signIn(r.client(), username: nil, authenticator: key, credential: credential)
                try check(reply.ok, reply.message)
            }
        }
        add("L3-7.2-6 F-2", "a discoverable login without a userHandle fails") {
            let (_, _, key, credential) = try await registered()
            let (reply, _) = try await r.signIn(r.client(), username: nil, authenticator: key, credential: credential) { $0.userHandle = nil }
            try check(reply.failedProperly, "expected a failure: \(reply.status) \(reply.message)")
        }
        add("L3-7.1-27 F-1", "registering a credential id that exists fails") {
            let c = r.client(), key = r.securityKey()
            let (first, parts) = try await r.register(c, username: r.uniqueName("dup"), authenticator: key)
            try check(first.ok, first.message)
            let (second, _) = try await r.register(r.client(), username: r.uniqueName("dup2"), authenticator: key) { copy in
                copy.id = parts.id
                copy.authenticatorData.attested = parts.authenticatorData.attested
            }
            try check(second.failedProperly, "duplicate accepted: \(second.status) \(second.message)")
        }
        return cases
    }

    /// Packed full attestation whose chain leads to a root no metadata names.
    static func untrustedPacked() throws -> SoftwareAuthenticator.Attestation {
        let rootKey = try SigningKey.generate(.es256)
        let root = try CertificateBuilder(subject: [("CN", "Unknown Root")]).build(key: rootKey, issuer: nil, issuerKey: rootKey)
        let key = try SigningKey.generate(.es256)
        var leaf = CertificateBuilder(subject: [("C", "AA"), ("O", "Unknown"), ("OU", "Authenticator Attestation"), ("CN", "Unknown Authenticator")])
        leaf.extensions = [("2.5.29.19", true, [0x30, 0x00])]
        let cert = try leaf.build(key: key, issuer: root, issuerKey: rootKey)
        return .packed(x5c: [cert.der], signer: try AttestationSigner(pem: key.privateKeyPEM()))
    }
}
