import Foundation
@_spi(Testing) import WebAuthnCore
@_spi(Testing) import WebAuthnTesting

extension CaseList {
    /// Server-ServerAuthenticatorAttestationResponse-Resp-1 to -B, API-RegistrationJSON,
    /// MDS3-Status and the L3 §6.1, §7.1 and §8 rules.
    func attestationCases() {
        let r = self.r, authority = self.authority, att = Self.att

        add("\(att)-Resp-1 P-1", "after a registration, options for the same user list its credential in excludeCredentials") {
            let c = r.client(), name = r.uniqueName("excl")
            let (reply, parts) = try await r.register(c, username: name, authenticator: r.securityKey(), attestation: .packedSelf)
            try check(reply.ok, reply.message)
            let o = try await c.post("/attestation/options", ["username": .string(name)])
            let excluded = o["excludeCredentials"]?.arrayValue ?? []
            try check(excluded.contains { $0["type"]?.stringValue == "public-key" && $0["id"]?.stringValue == Base64URL.encode(parts.id) }, "excludeCredentials: \(excluded)")
        }
        registration("\(att)-Resp-1 F-1", "a response without id fails", passes: false, json: Edits.without("id"))
        registration("\(att)-Resp-1 F-2", "an id that is not a string fails", passes: false, json: Edits.setting("id", 5))
        registration("\(att)-Resp-1 F-3", "an id that is not base64url fails", passes: false, json: Edits.setting("id", "!!!"))
        registration("\(att)-Resp-1 F-4", "a response without type fails", passes: false, json: Edits.without("type"))
        registration("\(att)-Resp-1 F-6", "a type other than public-key fails", passes: false, json: Edits.setting("type", "password"))
        registration("\(att)-Resp-1 F-7", "a response without response fails", passes: false, json: Edits.without("response"))
        registration("\(att)-Resp-1 F-8", "a response member that is not an object fails", passes: false, json: Edits.setting("response", "x"))
        registration("\(att)-Resp-1 F-9", "a response without clientDataJSON fails", passes: false, json: Edits.inResponse(Edits.without("clientDataJSON")))
        registration("\(att)-Resp-1 F-11", "an empty clientDataJSON fails", passes: false, json: Edits.inResponse(Edits.setting("clientDataJSON", "")))
        registration("\(att)-Resp-1 F-12", "a response without attestationObject fails", passes: false, json: Edits.inResponse(Edits.without("attestationObject")))
        registration("\(att)-Resp-1 F-14", "an empty attestationObject fails", passes: false, json: Edits.inResponse(Edits.setting("attestationObject", "")))

        // Wrong JSON types and empty values in the posted credential and in clientDataJSON.
        let regJSON = "API-RegistrationJSON"
        registration("\(regJSON) F-1", "a type that is not a string fails", passes: false, json: Edits.setting("type", 1))
        registration("\(regJSON) F-2", "a clientDataJSON that is not a string fails", passes: false, json: Edits.inResponse(Edits.setting("clientDataJSON", ["a": 1])))
        registration("\(regJSON) F-3", "a clientDataJSON that is not base64url fails", passes: false, json: Edits.inResponse(Edits.setting("clientDataJSON", "!!!")))
        registration("\(regJSON) F-4", "an attestationObject that is not a string fails", passes: false, json: Edits.inResponse(Edits.setting("attestationObject", 7)))
        registration("\(regJSON) F-5", "an attestationObject that is not base64url fails", passes: false, json: Edits.inResponse(Edits.setting("attestationObject", "!!!")))
        registration("\(regJSON) F-6", "an empty id fails", passes: false, json: Edits.setting("id", ""))
        registration("\(regJSON) F-7", "clientData.type that is not a string fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("type", 1)) })
        registration("\(regJSON) F-8", "an empty clientData.type fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("type", "")) })
        registration("\(regJSON) F-9", "clientData.challenge that is not a string fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("challenge", 1)) })
        registration("\(regJSON) F-10", "an empty clientData.challenge fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("challenge", "")) })
        registration("\(regJSON) F-11", "clientData.origin that is not a string fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("origin", ["https://example.com"])) })
        registration("\(regJSON) F-12", "an empty clientData.origin fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("origin", "")) })
        registration("\(regJSON) F-13", "clientDataJSON that is not JSON fails", passes: false, edit: { $0.clientDataOverride = Array("not json".utf8) })

        registration("\(att)-Resp-2 F-1", "clientData without type fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, removing: "type") })
        registration("\(att)-Resp-2 F-4", "clientData.type other than webauthn.create fails", passes: false, edit: { $0.clientData.type = "webauthn.nope" })
        registration("\(att)-Resp-2 F-5", "clientData.type webauthn.get fails", passes: false, edit: { $0.clientData.type = "webauthn.get" })
        registration("\(att)-Resp-2 F-6", "clientData without challenge fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, removing: "challenge") })
        registration("\(att)-Resp-2 F-9", "a challenge that is not base64url fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, setting: ("challenge", "!!!")) })
        registration("\(att)-Resp-2 F-10", "a challenge other than the issued one fails", passes: false, edit: { $0.clientData.challenge = SecureRandom.bytes(32) })
        registration("\(att)-Resp-2 F-11", "clientData without origin fails", passes: false, edit: { $0.clientDataOverride = Edits.clientData($0.clientData, removing: "origin") })
        registration("\(att)-Resp-2 F-14", "an origin other than the RP's fails", passes: false, edit: { $0.clientData.origin = "https://attacker.example" })
        registration("\(att)-Resp-2 F-17", "a tokenBinding.status that is not present/supported/not-supported fails", passes: false,
                     edit: { $0.clientData.extraJSON = #""tokenBinding":{"status":"unknown-status"}"# })

        @Sendable func object(_ parts: RegistrationParts, dropping key: String? = nil, replacing pair: (String, CBOR)? = nil) -> [UInt8] {
            var pairs = [CBORPair(.text("fmt"), .text(parts.format)), CBORPair(.text("attStmt"), parts.statement),
                         CBORPair(.text("authData"), .bytes(parts.authenticatorData.bytes))].filter { $0.key != .text(key ?? "") }
            if let pair { pairs = pairs.filter { $0.key != .text(pair.0) } + [CBORPair(.text(pair.0), pair.1)] }
            return CBOREncoder.encode(.map(pairs))
        }
        registration("\(att)-Resp-3 F-1", "an attestationObject that is not a CBOR map fails", passes: false, edit: { $0.attestationObjectOverride = [0x83, 0x01, 0x02, 0x03] })
        registration("\(att)-Resp-3 F-2", "an attestationObject without fmt fails", passes: false, edit: { $0.attestationObjectOverride = object($0, dropping: "fmt") })
        registration("\(att)-Resp-3 F-3", "a fmt that is not a text string fails", passes: false, edit: { $0.attestationObjectOverride = object($0, replacing: ("fmt", CBOR(1))) })
        registration("\(att)-Resp-3 P-1", "packed full attestation over authenticator data with extension data (ED set, credProtect) verifies", passes: true,
                     attestation: r.packedFull, edit: { parts in
                         parts.authenticatorData.extensions = .map([CBORPair(.text("credProtect"), CBOR(1))])
                         try SoftwareAuthenticator.Attestation.resignPacked(&parts, signer: AttestationSigner(pem: authority.attestationKeyPEM))
                     })
        registration("L3-6.1 F-1", "ED set without extension data fails", passes: false, edit: { $0.authenticatorData.flags.insert(.extensionData) })
        registration("L3-6.1 F-2", "extension data that is not a CBOR map fails", passes: false, edit: { $0.authenticatorData.extensions = .text("credProtect") })
        registration("\(att)-Resp-3 F-4", "an attestationObject without attStmt fails", passes: false, edit: { $0.attestationObjectOverride = object($0, dropping: "attStmt") })
        registration("\(att)-Resp-3 F-5", "an attStmt that is not a map fails", passes: false, edit: { $0.attestationObjectOverride = object($0, replacing: ("attStmt", .array([]))) })
        registration("\(att)-Resp-3 F-6", "an attestationObject without authData fails", passes: false, edit: { $0.attestationObjectOverride = object($0, dropping: "authData") })
        registration("\(att)-Resp-3 F-7", "an authData that is not a byte string fails", passes: false, edit: { $0.attestationObjectOverride = object($0, replacing: ("authData", .text("x"))) })
        registration("\(att)-Resp-3 F-8", "an empty authData fails", passes: false, edit: { $0.attestationObjectOverride = object($0, replacing: ("authData", .bytes([]))) })
        registration("\(att)-Resp-3 F-9", "AT clear while attested credential data is present fails", passes: false, edit: { $0.authenticatorData.flags.remove(.attestedCredentialData) })
        registration("\(att)-Resp-3 F-10", "AT clear and no attested credential data fails", passes: false,
                     edit: { $0.authenticatorData.flags.remove(.attestedCredentialData); $0.authenticatorData.attested = nil })
        registration("\(att)-Resp-3 F-12", "attested credential data with leftover bytes fails", passes: false, edit: { $0.authenticatorData.trailing = [0x00] })
        registration("\(att)-Resp-3 F-13", "a packed attStmt that is an empty map fails", passes: false, attestation: .packedSelf, edit: { $0.statement = .map([]) })
        registration("\(att)-Resp-3 F-14", "a packed attStmt without alg fails", passes: false, attestation: .packedSelf,
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).filter { $0.key != .text("alg") }) })
        registration("\(att)-Resp-3 F-17", "a packed attStmt without sig fails", passes: false, attestation: .packedSelf,
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).filter { $0.key != .text("sig") }) })
        registration("\(att)-Resp-3 F-19", "a packed attStmt with an empty sig fails", passes: false, attestation: .packedSelf,
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).map { $0.key == .text("sig") ? CBORPair(.text("sig"), .bytes([])) : $0 }) })

        for (n, alg, name) in [(2, COSEAlgorithm.ps256, "PS256"), (5, .rs256, "RS256"), (9, .es256, "ES256"), (10, .es384, "ES384"),
                               (11, .es512, "ES512"), (12, .edDSA, "EdDSA")] {
            registration("\(att)-Resp-4 P-\(n)", "packed self attestation with \(name) verifies", passes: true, algorithm: alg, attestation: .packedSelf)
        }

        registration("\(att)-Resp-5 P-1", "packed full attestation chaining to the metadata root verifies", passes: true, attestation: r.packedFull)
        registration("\(att)-Resp-5 F-2", "packed full attestation whose signature does not verify fails", passes: false, attestation: r.packedFull,
                     edit: { $0.authenticatorData.signCount = 99 })
        registration("\(att)-Resp-5 F-3", "packed full attestation without x5c (so self attestation with the wrong key) fails", passes: false, attestation: r.packedFull,
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).filter { $0.key != .text("x5c") }) })
        registration("\(att)-Resp-5 F-4", "an x5c that is not an array fails", passes: false, attestation: r.packedFull,
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).map { $0.key == .text("x5c") ? CBORPair(.text("x5c"), .bytes([1])) : $0 }) })
        registration("\(att)-Resp-5 F-5", "an empty x5c fails", passes: false, attestation: r.packedFull,
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).map { $0.key == .text("x5c") ? CBORPair(.text("x5c"), .array([])) : $0 }) })
        registration("\(att)-Resp-5 F-9", "an x5c chain that does not lead to a trusted root fails (trusted attestation required)", passes: false,
                     attestation: try! Self.untrustedPacked())

        // The attestation certificate requirements of §8.2.1 and path validity, each broken
        // alone on a certificate the runner's (trusted) authority issues.
        let aaguidOID = "1.3.6.1.4.1.45724.1.1.4", basicOID = "2.5.29.19"
        registration("L3-8.2.1 P-1", "packed full attestation with a certificate the runner builds the same way as the failing cases below verifies",
                     passes: true, attestation: try! Self.packedUnder(authority) { _ in })
        registration("L3-8.2.1 F-1", "an expired attestation certificate fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.notAfter = Date(timeIntervalSince1970: 1_735_689_600) })  // 2025-01-01
        registration("L3-8.2.1 F-2", "an attestation certificate that is not yet valid fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.notBefore = Date(timeIntervalSince1970: 4_070_908_800) })  // 2099-01-01
        registration("L3-8.2.1 F-3", "an attestation certificate of version 1 fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.version = 1; $0.extensions = [] })
        registration("L3-8.2.1 F-4", "an attestation certificate whose subject OU is not \"Authenticator Attestation\" fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.subject = $0.subject.map { $0.0 == "OU" ? ("OU", "Marketing") : $0 } })
        registration("L3-8.2.1 F-5", "an attestation certificate without subject CN fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.subject = $0.subject.filter { $0.0 != "CN" } })
        registration("L3-8.2.1 F-6", "an attestation certificate with basic constraints CA true fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.extensions = $0.extensions.map { $0.oid == basicOID ? (basicOID, true, DERWriter.basicConstraintsCATrue) : $0 } })
        registration("L3-8.2.1 F-7", "an attestation certificate whose AAGUID extension differs from authenticator data fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.extensions = $0.extensions.map { $0.oid == aaguidOID ? (aaguidOID, false, DERWriter.aaguid([UInt8](repeating: 0x42, count: 16))) : $0 } })
        registration("L3-8.2.1 F-8", "an attestation certificate whose AAGUID extension is critical fails", passes: false,
                     attestation: try! Self.packedUnder(authority) { $0.extensions = $0.extensions.map { $0.oid == aaguidOID ? (aaguidOID, true, $0.der) : $0 } })
        registration("L3-8.2 F-1", "a packed sig made with a key other than the attestation certificate's fails", passes: false,
                     attestation: try! Self.packedUnder(authority, signer: SigningKey.generate(.es256)) { _ in })
        registration("L3-8.2 F-2", "an x5c whose first certificate is the root, not the attestation certificate, fails", passes: false,
                     attestation: try! Self.packedUnder(authority, rootFirst: true) { _ in })

        // FIDO metadata status reports (MDS3 §3.1.4): the runner's status authenticators, each
        // with its own AAGUID and a packed full attestation under the trusted root.
        for (i, item) in ConformancePKI.statusAuthenticators.enumerated() {
            let compromised = AuthenticatorStatus(rawValue: item.status).isCompromised
            let id = compromised ? "MDS3-Status F-\(i + 1)" : "MDS3-Status P-\(i - 4)"
            add(id, "packed full attestation from an authenticator whose metadata status is \(item.status) \(compromised ? "fails" : "verifies")") {
                var profile = SoftwareAuthenticator.Profile.securityKey
                profile.aaguid = item.aaguid.bytes
                let (reply, _) = try await r.register(r.client(), username: r.uniqueName("mds"), authenticator: SoftwareAuthenticator(profile: profile),
                                                      attestation: try Self.packedUnder(authority, aaguid: item.aaguid) { _ in })
                try reply.expect(passes: !compromised)
            }
        }

        registration("\(att)-Resp-6 P-1", "packed self attestation verifies", passes: true, attestation: .packedSelf)
        registration("\(att)-Resp-6 F-1", "packed self attestation whose signature does not verify fails", passes: false, attestation: .packedSelf,
                     edit: { $0.authenticatorData.signCount = 77 })
        registration("\(att)-Resp-6 F-3", "an unknown fmt fails", passes: false, edit: { $0.format = "not-a-format" })
        registration("\(att)-Resp-7 P-1", "none attestation verifies", passes: true)
        registration("\(att)-Resp-7 F-1", "fmt none with a non-empty attStmt fails", passes: false, edit: { $0.statement = .map([CBORPair(.text("sig"), .bytes([1]))]) })
        registration("\(att)-Resp-8 P-1", "fido-u2f attestation chaining to the metadata root (matched by key identifier) verifies", passes: true, attestation: .fidoU2F(authority))
        registration("\(att)-Resp-8 F-1", "fido-u2f with a non-zero AAGUID fails", passes: false, attestation: .fidoU2F(authority),
                     edit: { $0.authenticatorData.attested?.aaguid = SecureRandom.bytes(16) })
        registration("\(att)-Resp-8 F-2", "fido-u2f whose signature does not verify (signed over another credential id) fails", passes: false, attestation: .fidoU2F(authority),
                     edit: { let other = SecureRandom.bytes(32); $0.id = other; $0.authenticatorData.attested?.credentialId = other })
        registration("\(att)-Resp-9 P-1", "tpm attestation (SHA-256, ECC pubArea, AIK certificate) verifies", passes: true, attestation: .tpm(authority))
        registration("\(att)-Resp-9 F-2", "tpm with certInfo.extraData not the hash of attToBeSigned fails", passes: false, attestation: .tpm(authority), defect: .wrongExtraData)
        // tpm statement members changed one at a time; certInfo changes are re-signed by the AIK
        // so that only the changed rule is broken.
        @Sendable func tpmStatement(_ parts: inout RegistrationParts, _ change: (inout [String: [UInt8]]) -> Void, resign: Bool = false) throws {
            guard case .map(let pairs) = parts.statement else { return }
            var members: [String: [UInt8]] = [:]
            for pair in pairs { if case .text(let k) = pair.key, let b = pair.value.bytesValue { members[k] = b } }
            change(&members)
            if resign, let certInfo = members["certInfo"] {
                members["sig"] = try SigningKey(pem: authority.attestationKeyPEM, algorithm: .es256).sign(certInfo)
            }
            parts.statement = .map(pairs.map { pair in
                if case .text(let k) = pair.key, let b = members[k] { return CBORPair(pair.key, .bytes(b)) }
                return pair
            })
        }
        registration("L3-8.3 F-3", "tpm with ver other than \"2.0\" fails", passes: false, attestation: .tpm(authority),
                     edit: { $0.statement = .map(($0.statement.mapValue ?? []).map { $0.key == .text("ver") ? CBORPair(.text("ver"), .text("1.0")) : $0 }) })
        registration("L3-8.3 F-4", "tpm whose certInfo magic is not TPM_GENERATED_VALUE fails (re-signed by the AIK)", passes: false, attestation: .tpm(authority),
                     edit: { try tpmStatement(&$0, { $0["certInfo"]?[3] ^= 0x01 }, resign: true) })
        registration("L3-8.3 F-5", "tpm whose certInfo type is not TPM_ST_ATTEST_CERTIFY fails (re-signed by the AIK)", passes: false, attestation: .tpm(authority),
                     edit: { try tpmStatement(&$0, { $0["certInfo"]?[5] = 0x18 }, resign: true) })
        registration("L3-8.3 F-6", "tpm whose pubArea key is not the credential key fails", passes: false, attestation: .tpm(authority),
                     edit: { try tpmStatement(&$0, { if let n = $0["pubArea"]?.count { $0["pubArea"]?[n - 1] ^= 0x01 } }) })
        registration("L3-8.3 F-7", "tpm whose AIK signature over certInfo does not verify fails", passes: false, attestation: .tpm(authority),
                     edit: { try tpmStatement(&$0, { if let n = $0["sig"]?.count { $0["sig"]?[n / 2] ^= 0x01 } }) })
        registration("L3-8.4 F-2", "android-key whose signature does not verify with the leaf certificate's key fails", passes: false,
                     attestation: .androidKey(authority), edit: { $0.authenticatorData.signCount = 5 })
        registration("\(att)-Resp-B P-1", "android-safetynet attestation (JWS by attest.android.com under the metadata root, fresh, ctsProfileMatch) verifies",
                     passes: true, attestation: .androidSafetyNet(authority))
        registration("L3-8.5 F-1", "android-safetynet whose nonce is not base64(SHA-256(authData ‖ clientDataHash)) fails", passes: false,
                     attestation: .androidSafetyNet(authority), defect: .wrongNonce)
        registration("L3-8.5 F-2", "android-safetynet with a day-old timestampMs fails", passes: false, attestation: .androidSafetyNet(authority), defect: .staleTimestamp)
        registration("L3-8.5 F-3", "android-safetynet with ctsProfileMatch false fails", passes: false, attestation: .androidSafetyNet(authority), defect: .ctsProfileMismatch)
        registration("L3-8.5 F-4", "android-safetynet signed by a certificate not issued to attest.android.com fails", passes: false,
                     attestation: .androidSafetyNet(authority), defect: .wrongHost)
        registration("\(att)-Resp-A P-1", "android-key attestation verifies", passes: true, attestation: .androidKey(authority))
        registration("\(att)-Resp-A F-1", "android-key whose certificate binds another clientDataHash fails", passes: false, attestation: .androidKey(authority), defect: .wrongChallenge)

        registration("L3-8.3 P-1", "tpm attestation with an RSA pubArea (RS256 credential) verifies", passes: true, algorithm: .rs256, attestation: .tpm(authority))
        registration("L3-8.3 P-2", "tpm attestation signed RS1 (SHA-1) by an RSA AIK, as Windows Hello TPMs make it, verifies", passes: true,
                     attestation: .tpmSHA1(authority))
        registration("L3-8.3 F-2", "tpm attestation signed RS1 whose extraData is not the SHA-1 of attToBeSigned fails", passes: false,
                     attestation: .tpmSHA1(authority), defect: .wrongExtraData)
        registration("L3-8.3.1 F-1", "tpm with an AIK certificate lacking tcg-kp-AIKCertificate fails", passes: false, attestation: .tpm(authority), defect: .aikWithoutEKU)
        registration("L3-8.4 F-1", "android-key with allApplications fails", passes: false, attestation: .androidKey(authority), defect: .allApplications)
        registration("L3-8.8 P-1", "apple anonymous attestation verifies", passes: true, attestation: .apple(authority))
        registration("L3-8.8 F-1", "apple with a nonce other than SHA-256(authData ‖ clientDataHash) fails", passes: false, attestation: .apple(authority), defect: .wrongNonce)
        registration("L3-7.1-14 F-1", "a registration with a wrong rpIdHash fails", passes: false, edit: { $0.authenticatorData.rpIdHash = Digest.sha256(Array("attacker.example".utf8)) })
        registration("L3-7.1-15 F-1", "a registration with UP clear fails", passes: false, edit: { $0.authenticatorData.flags.remove(.userPresent) })
        registration("L3-7.1-17 F-1", "a registration with BS but not BE fails", passes: false, edit: { $0.authenticatorData.flags.insert(.backupState) })
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

    /// Packed full attestation under the runner's root with the certificate changed by `change`.
    static func packedUnder(_ authority: AttestationAuthority, signer: SigningKey? = nil, rootFirst: Bool = false, aaguid: AAGUID = ConformancePKI.aaguid,
                            _ change: (inout CertificateBuilder) -> Void) throws -> SoftwareAuthenticator.Attestation {
        try authority.packedAttestation(aaguid: aaguid.bytes, signer: signer, rootFirst: rootFirst, certificate: change)
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
