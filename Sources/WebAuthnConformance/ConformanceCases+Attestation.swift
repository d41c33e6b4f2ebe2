internal import Foundation
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension CaseList {
    /// Server-ServerAuthenticatorAttestationResponse-Resp-1 to -3 (the response, clientData and
    /// attestationObject structure), API-RegistrationJSON and L3 §6.1; the formats follow in
    /// ConformanceCases+Formats.
    func attestationCases() {
        let r = self.r, authority = self.authority, att = Self.att

        add("\(att)-Resp-1 P-1", "after a registration, options for the same user list its credential in excludeCredentials") {
            let c = r.client(), name = r.uniqueName("excl")
            let (reply, parts) = try await r.register(c, username: name, authenticator: r.securityKey(), attestation: r.packedFull)
            try check(reply.ok, reply.message)
            let o = try await c.post("/attestation/options", ["username": .string(name)])
            let excluded = o["excludeCredentials"]?.arrayValue ?? []
            try check(
                excluded.contains { $0["type"]?.stringValue == "public-key" && $0["id"]?.stringValue == Base64URL.encode(parts.id) },
                "excludeCredentials: \(excluded)")
        }
        let response = Edits.inResponse
        for (n, intent, edit) in Self.credentialShapeDefects() {
            registration("\(att)-Resp-1 F-\(n)", intent, passes: false, json: edit)
        }
        registration("\(att)-Resp-1 F-12", "a response without attestationObject fails", passes: false, json: response(Edits.without("attestationObject")))
        registration(
            "\(att)-Resp-1 F-13", "an attestationObject that is not a string fails", passes: false, json: response(Edits.setting("attestationObject", 7)))
        registration("\(att)-Resp-1 F-14", "an empty attestationObject fails", passes: false, json: response(Edits.setting("attestationObject", "")))

        // Encodings and values the list does not name.
        let regJSON = "API-RegistrationJSON"
        registration("\(regJSON) F-1", "a clientDataJSON that is not base64url fails", passes: false, json: response(Edits.setting("clientDataJSON", "!!!")))
        registration(
            "\(regJSON) F-2", "an attestationObject that is not base64url fails", passes: false, json: response(Edits.setting("attestationObject", "!!!")))
        registration("\(regJSON) F-3", "an empty id fails", passes: false, json: Edits.setting("id", ""))
        registration("\(regJSON) F-4", "clientDataJSON that is not JSON fails", passes: false, edit: { $0.clientDataOverride = Array("not json".utf8) })
        // Broken CBOR: the attestation object cut short, or followed by more bytes.
        registration(
            "API-RegistrationCBOR F-1", "an attestationObject cut short (its last 8 bytes missing) fails", passes: false,
            edit: { $0.attestationObjectOverride = Array($0.attestationObject.dropLast(8)) })
        registration(
            "API-RegistrationCBOR F-2", "an attestationObject followed by trailing bytes fails", passes: false,
            edit: { $0.attestationObjectOverride = $0.attestationObject + [0x00] })

        for (n, intent, edit) in Self.clientDataDefects(expectedType: "webauthn.create") {
            registration("\(att)-Resp-2 F-\(n)", intent, passes: false, edit: { edit(&$0.clientData, &$0.clientDataOverride) })
        }
        registration(
            "L3-5.8.1 P-1",
            "a clientData tokenBinding that is not an object is ignored (reserved in L3; a real browser sent \"unused\"; the list's Resp-2 F-15 expects a failure)",
            passes: true, edit: { $0.clientData.extraJSON = #""tokenBinding":"unused""# })

        @Sendable func object(_ parts: RegistrationParts, dropping key: String? = nil, replacing pair: (String, CBOR)? = nil) -> [UInt8] {
            var pairs = [
                CBORPair(.text("fmt"), .text(parts.format.rawValue)), CBORPair(.text("attStmt"), parts.statement),
                CBORPair(.text("authData"), .bytes(parts.authenticatorData.bytes)),
            ].filter { $0.key != .text(key ?? "") }
            if let pair { pairs = pairs.filter { $0.key != .text(pair.0) } + [CBORPair(.text(pair.0), pair.1)] }
            return CBOREncoder.encode(.map(pairs))
        }
        registration(
            "\(att)-Resp-3 P-1", "packed full attestation over authenticator data with extension data (ED set, credProtect) verifies", passes: true,
            attestation: r.packedFull,
            edit: { parts in
                parts.authenticatorData.extensions = .map([CBORPair(.text("credProtect"), CBOR(1))])
                try SoftwareAuthenticator.Attestation.resignPacked(&parts, signer: AttestationSigner(key: authority.attestationKey))
            })
        registration(
            "\(att)-Resp-3 F-1", "an attestationObject that is not a CBOR map fails", passes: false,
            edit: { $0.attestationObjectOverride = [0x83, 0x01, 0x02, 0x03] })
        registration(
            "\(att)-Resp-3 F-2", "an attestationObject without fmt fails", passes: false, edit: { $0.attestationObjectOverride = object($0, dropping: "fmt") })
        registration(
            "\(att)-Resp-3 F-3", "a fmt that is not a text string fails", passes: false,
            edit: { $0.attestationObjectOverride = object($0, replacing: ("fmt", CBOR(1))) })
        registration(
            "\(att)-Resp-3 F-4", "an attestationObject without attStmt fails", passes: false,
            edit: { $0.attestationObjectOverride = object($0, dropping: "attStmt") })
        registration(
            "\(att)-Resp-3 F-5", "an attStmt that is not a map fails", passes: false,
            edit: { $0.attestationObjectOverride = object($0, replacing: ("attStmt", .array([]))) })
        registration(
            "\(att)-Resp-3 F-6", "an attestationObject without authData fails", passes: false,
            edit: { $0.attestationObjectOverride = object($0, dropping: "authData") })
        registration(
            "\(att)-Resp-3 F-7", "an authData that is not a byte string fails", passes: false,
            edit: { $0.attestationObjectOverride = object($0, replacing: ("authData", .text("x"))) })
        registration(
            "\(att)-Resp-3 F-8", "an empty authData fails", passes: false,
            edit: { $0.attestationObjectOverride = object($0, replacing: ("authData", .bytes([]))) })
        registration(
            "\(att)-Resp-3 F-9", "AT clear while attested credential data is present fails", passes: false,
            edit: { $0.authenticatorData.flags.remove(.attestedCredentialData) })
        registration(
            "\(att)-Resp-3 F-10", "AT clear and no attested credential data fails", passes: false,
            edit: {
                $0.authenticatorData.flags.remove(.attestedCredentialData); $0.authenticatorData.attested = nil
            })
        registration(
            "\(att)-Resp-3 F-11", "AT set but no attested credential data fails", passes: false,
            edit: {
                $0.authenticatorData.attested = nil; $0.authenticatorData.flags.insert(.attestedCredentialData)
            })
        registration(
            "\(att)-Resp-3 F-12", "attested credential data with leftover bytes fails", passes: false, edit: { $0.authenticatorData.trailing = [0x00] })
        registration(
            "\(att)-Resp-3 F-13", "a packed attStmt that is an empty map fails", passes: false, attestation: .packedSelf, edit: { $0.statement = .map([]) })
        registration(
            "\(att)-Resp-3 F-14", "a packed attStmt without alg fails", passes: false, attestation: .packedSelf,
            edit: { $0.statement = $0.statement.removing("alg") })
        registration(
            "\(att)-Resp-3 F-15", "a packed attStmt.alg that is not a number fails", passes: false, attestation: .packedSelf,
            edit: { $0.statement = $0.statement.replacing("alg", with: .text("ES256")) })
        registration(
            "\(att)-Resp-3 F-16", "a packed attStmt.alg (ES384) that does not match the attestation key and its metadata (ES256, P-256) fails", passes: false,
            attestation: r.packedFull, edit: { $0.statement = $0.statement.replacing("alg", with: CBOR(COSEAlgorithm.es384.rawValue)) })
        registration(
            "\(att)-Resp-3 F-17", "a packed attStmt without sig fails", passes: false, attestation: .packedSelf,
            edit: { $0.statement = $0.statement.removing("sig") })
        registration(
            "\(att)-Resp-3 F-18", "a packed attStmt.sig that is not a byte string fails", passes: false, attestation: .packedSelf,
            edit: { $0.statement = $0.statement.replacing("sig", with: .text("signature")) })
        registration(
            "\(att)-Resp-3 F-19", "a packed attStmt with an empty sig fails", passes: false, attestation: .packedSelf,
            edit: { $0.statement = $0.statement.replacing("sig", with: .bytes([])) })
        registration("L3-6.1 F-1", "ED set without extension data fails", passes: false, edit: { $0.authenticatorData.flags.insert(.extensionData) })
        registration(
            "L3-6.1 F-2", "extension data that is not a CBOR map fails", passes: false, edit: { $0.authenticatorData.extensions = .text("credProtect") })

        formatCases()
    }

    /// The L3 §7.1 registration steps the list lacks.
    func ceremonyCases() {
        let r = self.r
        registration(
            "L3-7.1-14 F-1", "a registration with a wrong rpIdHash fails", passes: false,
            edit: { $0.authenticatorData.rpIdHash = Digest.sha256(Array("attacker.example".utf8)) })
        registration("L3-7.1-15 F-1", "a registration with UP clear fails", passes: false, edit: { $0.authenticatorData.flags.remove(.userPresent) })
        registration("L3-7.1-17 F-1", "a registration with BS but not BE fails", passes: false, edit: { $0.authenticatorData.flags.insert(.backupState) })
        registration("L3-7.1-26 P-1", "a credential ID of 1023 bytes (the most allowed) verifies", passes: true, credentialIdLength: 1023)
        registration("L3-7.1-26 F-1", "a credential ID of 1024 bytes fails", passes: false, credentialIdLength: 1024)
        add("L3-7.1-20 F-1", "a credential whose algorithm the server did not offer in pubKeyCredParams fails") {
            let c = r.client()
            let offered = try await c.post("/attestation/options", ["username": .string(r.uniqueName("alg"))])
            let algs = Set(offered["pubKeyCredParams"]?.arrayValue?.compactMap { $0["alg"]?.intValue } ?? [])
            guard let alg = [COSEAlgorithm.rs384, .es512, .es384, .ps384, .rs512, .ed448, .ps512, .rs1].first(where: { !algs.contains($0.rawValue) }) else {
                throw CaseFailure("the server offers every algorithm the runner can make; nothing to refuse")
            }
            let (reply, _) = try await r.register(c, username: r.uniqueName("alg"), authenticator: r.securityKey(), algorithm: alg)
            try check(reply.failedProperly, "\(alg) was not offered but accepted: \(reply.status) \(reply.message)")
        }
        add("L3-7.1-27 F-1", "registering a credential id that exists fails") {
            let key = r.securityKey()
            let (first, parts) = try await r.register(r.client(), username: r.uniqueName("dup"), authenticator: key)
            try check(first.ok, first.message)
            let (second, _) = try await r.register(r.client(), username: r.uniqueName("dup2"), authenticator: key) { copy in
                copy.id = parts.id
                copy.authenticatorData.attested = parts.authenticatorData.attested
            }
            try check(second.failedProperly, "duplicate accepted: \(second.status) \(second.message)")
        }
    }

    /// The list's response-structure cases shared by attestation and assertion Resp-1 (F-1 to F-11), by number.
    static func credentialShapeDefects() -> [(Int, String, JSONEdit)] {
        let response = Edits.inResponse
        return [
            (1, "a response without id fails", Edits.without("id")),
            (2, "an id that is not a string fails", Edits.setting("id", 5)),
            (3, "an id that is not base64url fails", Edits.setting("id", "!!!")),
            (4, "a response without type fails", Edits.without("type")),
            (5, "a type that is not a string fails", Edits.setting("type", 1)),
            (6, "a type other than public-key fails", Edits.setting("type", "password")),
            (7, "a response without response fails", Edits.without("response")),
            (8, "a response member that is not an object fails", Edits.setting("response", "x")),
            (9, "a response without clientDataJSON fails", response(Edits.without("clientDataJSON"))),
            (10, "a clientDataJSON that is not a string fails", response(Edits.setting("clientDataJSON", ["a": 1]))),
            (11, "an empty clientDataJSON fails", response(Edits.setting("clientDataJSON", ""))),
        ]
    }

    typealias ClientDataEdit = @Sendable (inout ClientDataParts, inout [UInt8]?) -> Void

    /// The list's CollectClientData cases (attestation and assertion Resp-2 F-1 to F-17), by number;
    /// F-15 (a tokenBinding that is not an object) contradicts L3 and runs as L3-5.8.1 P-1 and P-2.
    static func clientDataDefects(expectedType: String) -> [(Int, String, ClientDataEdit)] {
        let other = expectedType == "webauthn.create" ? "webauthn.get" : "webauthn.create"
        func setting(_ key: String, _ value: JSONValue) -> ClientDataEdit { { c, o in o = Edits.clientData(c, setting: (key, value)) } }
        func removing(_ key: String) -> ClientDataEdit { { c, o in o = Edits.clientData(c, removing: key) } }
        return [
            (1, "clientData without type fails", removing("type")),
            (2, "clientData.type that is not a string fails", setting("type", 1)),
            (3, "an empty clientData.type fails", setting("type", "")),
            (4, "clientData.type other than \(expectedType) fails", { c, _ in c.type = "webauthn.nope" }),
            (5, "clientData.type \(other) fails", { c, _ in c.type = other }),
            (6, "clientData without challenge fails", removing("challenge")),
            (7, "clientData.challenge that is not a string fails", setting("challenge", 1)),
            (8, "an empty clientData.challenge fails", setting("challenge", "")),
            (9, "a challenge that is not base64url fails", setting("challenge", "!!!")),
            (10, "a challenge other than the issued one fails", { c, _ in c.challenge = SecureRandom.bytes(32) }),
            (11, "clientData without origin fails", removing("origin")),
            (12, "clientData.origin that is not a string fails", setting("origin", ["https://example.com"])),
            (13, "an empty clientData.origin fails", setting("origin", "")),
            (14, "an origin other than the RP's fails", { c, _ in c.origin = "https://attacker.example" }),
            (16, "a tokenBinding without status fails", { c, _ in c.extraJSON = #""tokenBinding":{"id":"AAAA"}"# }),
            (
                17, "a tokenBinding.status that is not present/supported/not-supported fails",
                { c, _ in c.extraJSON = #""tokenBinding":{"status":"unknown-status"}"# }
            ),
        ]
    }
}
