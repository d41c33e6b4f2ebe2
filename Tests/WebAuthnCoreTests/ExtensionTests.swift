import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Extensions with server-side meaning, requested properties, and the newer
/// algorithm names: each rule broken one way at a time.
@Suite("Engine: extensions, requested properties and algorithms")
struct ExtensionTests {
    let origin = "https://example.com"
    let user = UserEntity.new(name: "alice")

    func engine(policy: VerificationPolicy = VerificationPolicy()) throws -> WebAuthnEngine {
        WebAuthnEngine(relyingParty: try RelyingParty(id: "example.com", origins: ["https://example.com"], policy: policy))
    }

    /// Starts a registration with `extensions` and `selection`, lets `change` alter the response, and finishes it.
    func register(
        _ engine: WebAuthnEngine, extensions: ClientExtensions = ClientExtensions(), selection: AuthenticatorSelection? = nil,
        authenticator: SoftwareAuthenticator = SoftwareAuthenticator(), algorithm: COSEAlgorithm = .es256,
        attestation: SoftwareAuthenticator.Attestation = .none, change: (inout RegistrationParts) -> Void = { _ in }
    ) async throws -> RegistrationResult {
        let options = try await engine.startRegistration(user: user, authenticatorSelection: selection, extensions: extensions)
        var parts = try authenticator.register(
            rpId: "example.com", origin: origin, challenge: options.challenge, userHandle: user.id, algorithm: algorithm, attestation: attestation)
        change(&parts)
        return try await engine.finishRegistration(parts.response)
    }

    func credProtect(_ level: Int) -> (inout RegistrationParts) -> Void {
        { $0.authenticatorData.extensions = .map([CBORPair(.text("credProtect"), CBOR(level))]) }
    }

    func outputs(_ json: String) -> (inout RegistrationParts) -> Void {
        { $0.clientExtensionResults = try! ClientExtensions(json: json) }
    }

    // MARK: credProtect

    @Test("credProtect enforced: a weaker level, or none, is refused; an equal or stronger one is recorded")
    func credProtectEnforced() async throws {
        let engine = try engine()
        var inputs = ClientExtensions()
        inputs.requestCredentialProtection(.userVerificationRequired, enforce: true)
        #expect(inputs.json.contains(#""credentialProtectionPolicy":"userVerificationRequired""#))
        #expect(await errorCode { _ = try await register(engine, extensions: inputs, change: credProtect(1)) } == "credential_protection_weaker")
        #expect(await errorCode { _ = try await register(engine, extensions: inputs, change: credProtect(2)) } == "credential_protection_weaker")
        #expect(await errorCode { _ = try await register(engine, extensions: inputs) } == "credential_protection_weaker")
        let ok = try await register(engine, extensions: inputs, change: credProtect(3))
        #expect(ok.credential.properties.credentialProtection == .userVerificationRequired)
        #expect(await errorCode { _ = try await register(engine, extensions: inputs, change: credProtect(7)) } == "extension_output_invalid")
    }

    @Test("credProtect not enforced: a weaker level is recorded as reported")
    func credProtectNotEnforced() async throws {
        let engine = try engine()
        var inputs = ClientExtensions()
        inputs.requestCredentialProtection(.userVerificationRequired, enforce: false)
        let result = try await register(engine, extensions: inputs, change: credProtect(1))
        #expect(result.credential.properties.credentialProtection == .userVerificationOptional)
        // Stored as it was verified.
        #expect(try await engine.credentials.credential(id: result.credential.id)?.properties.credentialProtection == .userVerificationOptional)
    }

    // MARK: credProps and residentKey

    @Test("residentKey required: credProps.rk false is refused (or recorded under the policy); true or absent records discoverable")
    func discoverableRequired() async throws {
        let required = AuthenticatorSelection(residentKey: .required)
        let engine = try engine()
        #expect(
            await errorCode { _ = try await register(engine, selection: required, change: outputs(#"{"credProps":{"rk":false}}"#)) }
                == "discoverable_credential_missing")
        #expect(try await register(engine, selection: required, change: outputs(#"{"credProps":{"rk":true}}"#)).credential.properties.discoverable == true)
        #expect(try await register(engine, selection: required).credential.properties.discoverable == true)
        let lenient = try self.engine(policy: VerificationPolicy(refuseNonDiscoverableWhenRequired: false))
        let recorded = try await register(lenient, selection: required, change: outputs(#"{"credProps":{"rk":false}}"#))
        #expect(recorded.credential.properties.discoverable == false)
        // Not required: recorded as reported; unknown when not reported.
        #expect(try await register(engine, change: outputs(#"{"credProps":{"rk":false}}"#)).credential.properties.discoverable == false)
        #expect(try await register(engine).credential.properties.discoverable == nil)
        #expect(await errorCode { _ = try await register(engine, change: outputs(#"{"credProps":{"rk":"yes"}}"#)) } == "extension_output_invalid")
    }

    @Test("the attachment that came back is recorded, whatever was asked")
    func attachmentRecorded() async throws {
        let engine = try engine()
        let asked = AuthenticatorSelection(authenticatorAttachment: .platform)
        let result = try await register(engine, selection: asked, authenticator: SoftwareAuthenticator(profile: .securityKey))
        #expect(result.credential.properties.authenticatorAttachment == .crossPlatform)
    }

    // MARK: prf, largeBlob, minPinLength

    @Test("prf: inputs pass through, prf.enabled is recorded, results never reach the server's records")
    func prf() async throws {
        let engine = try engine()
        var inputs = ClientExtensions()
        inputs.requestPRF(eval: PRFInputs(first: [1, 2, 3]))
        let options = try await engine.startRegistration(user: user, extensions: inputs)
        #expect(options.json["extensions"]?["prf"]?["eval"]?["first"]?.stringValue == Base64URL.encode([1, 2, 3]))
        let result = try await register(
            engine, extensions: inputs, change: outputs(#"{"prf":{"enabled":true,"results":{"first":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"}}}"#))
        #expect(result.credential.properties.prfEnabled == true)
        #expect(result.clientExtensionResults.json == #"{"prf":{"enabled":true}}"#)
        var auth = ClientExtensions()
        let id = result.credential.id
        auth.requestPRF(eval: nil, evalByCredential: [id: PRFInputs(first: [9], second: [8])])
        let request = try await engine.startAuthentication(userHandle: user.id, extensions: auth)
        #expect(request.json["extensions"]?["prf"]?["evalByCredential"]?[Base64URL.encode(id)]?["second"]?.stringValue == Base64URL.encode([8]))
    }

    @Test("largeBlob.supported and minPinLength are recorded; an out-of-range minPinLength is refused")
    func largeBlobAndMinPinLength() async throws {
        let engine = try engine()
        var inputs = ClientExtensions()
        inputs.requestLargeBlob(support: .preferred)
        inputs.requestMinPinLength()
        let result = try await register(engine, extensions: inputs) { parts in
            parts.clientExtensionResults = try! ClientExtensions(json: #"{"largeBlob":{"supported":true}}"#)
            parts.authenticatorData.extensions = .map([CBORPair(.text("minPinLength"), CBOR(8))])
        }
        #expect(result.credential.properties.largeBlobSupported == true && result.credential.properties.minPinLength == 8)
        #expect(
            await errorCode {
                _ = try await register(engine, extensions: inputs) { $0.authenticatorData.extensions = .map([CBORPair(.text("minPinLength"), CBOR(200))]) }
            } == "extension_output_invalid")
    }

    @Test("unknown extension inputs pass through and unknown outputs are ignored")
    func unknownExtensions() async throws {
        let engine = try engine()
        let inputs = try ClientExtensions(json: #"{"example.extension":{"x":1}}"#)
        let options = try await engine.startRegistration(user: user, extensions: inputs)
        #expect(options.json["extensions"]?["example.extension"]?["x"]?.intValue == 1)
        let result = try await register(engine, extensions: inputs, change: outputs(#"{"example.extension":"anything"}"#))
        #expect(result.credential.properties == CredentialProperties(authenticatorAttachment: .platform))
    }

    // MARK: appid

    /// A U2F key registered (fido-u2f), then an assertion signed over `signedOver` instead of the RP ID.
    func appIDSignIn(policy: VerificationPolicy, offered: String?, signedOver: String, attestation: SoftwareAuthenticator.Attestation? = nil) async throws
        -> AuthenticationResult
    {
        let engine = try engine(policy: policy)
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let credential = try await register(engine, authenticator: authenticator, attestation: attestation ?? .fidoU2F(try AttestationAuthority.generate()))
        var inputs = ClientExtensions()
        if let offered { inputs.setAppID(offered) }
        let options = try await engine.startAuthentication(userHandle: user.id, extensions: inputs)
        var parts = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: options.challenge, credentialId: credential.credential.id)
        parts.authenticatorData.rpIdHash = Digest.sha256(Array(signedOver.utf8))
        parts.clientExtensionResults = try ClientExtensions(json: #"{"appid":true}"#)
        return try await engine.finishAuthentication(try authenticator.resign(parts).response)
    }

    @Test("appid: an assertion over the configured AppID is accepted for a U2F credential, and only then")
    func appID() async throws {
        let appID = "https://example.com/app-id.json"
        let policy = VerificationPolicy(u2fAppID: appID)
        let result = try await appIDSignIn(policy: policy, offered: appID, signedOver: appID)
        #expect(result.usedAppID)
        // The options did not offer it.
        #expect(await errorCode { _ = try await appIDSignIn(policy: policy, offered: nil, signedOver: appID) } == "rp_id_hash_mismatch")
        // Offered, but not the AppID the relying party configured: dropped from the options.
        #expect(
            await errorCode {
                _ = try await appIDSignIn(policy: policy, offered: "https://evil.example/app-id.json", signedOver: "https://evil.example/app-id.json")
            }
                == "rp_id_hash_mismatch")
        #expect(await errorCode { _ = try await appIDSignIn(policy: VerificationPolicy(), offered: appID, signedOver: appID) } == "rp_id_hash_mismatch")
        // Offered and configured, but signed over neither the RP ID nor the AppID (mutation testing:
        // without the comparison with the AppID's hash, any rpIdHash passed).
        #expect(
            await errorCode { _ = try await appIDSignIn(policy: policy, offered: appID, signedOver: "https://evil.example/app-id.json") }
                == "rp_id_hash_mismatch")
        // A credential registered through WebAuthn (not fido-u2f) is bound to the RP ID.
        #expect(
            await errorCode {
                _ = try await appIDSignIn(policy: policy, offered: appID, signedOver: appID, attestation: SoftwareAuthenticator.Attestation.none)
            } == "rp_id_hash_mismatch")
        // Over the RP ID, the AppID is not used.
        #expect(try await appIDSignIn(policy: policy, offered: appID, signedOver: "example.com").usedAppID == false)
    }

    @Test("an appid the policy does not name is removed from the options")
    func appIDDropped() async throws {
        let engine = try engine(policy: VerificationPolicy(u2fAppID: "https://example.com/app-id.json"))
        var inputs = ClientExtensions()
        inputs.setAppID("https://evil.example/app-id.json")
        #expect(try await engine.startAuthentication(extensions: inputs).json["extensions"]?["appid"] == nil)
        inputs.setAppID("https://example.com/app-id.json")
        #expect(try await engine.startAuthentication(extensions: inputs).json["extensions"]?["appid"]?.stringValue == "https://example.com/app-id.json")
    }

    // MARK: Options

    @Test("hints and attestationFormats are echoed as asked")
    func hintsAndFormats() async throws {
        let engine = try engine()
        let options = try await engine.startRegistration(user: user, hints: [.securityKey, .hybrid], attestationFormats: [.packed, .tpm])
        #expect(options.json["hints"]?.arrayValue?.compactMap(\.stringValue) == ["security-key", "hybrid"])
        #expect(options.json["attestationFormats"]?.arrayValue?.compactMap(\.stringValue) == ["packed", "tpm"])
        #expect(try await engine.startRegistration(user: user).json["attestationFormats"] == nil)
    }

    // MARK: Algorithms

    @Test(
        "ES256K, ESP256, ESP384, ESP512 and Ed25519 (-19) register and sign in when offered",
        arguments: [
            COSEAlgorithm.es256K, .esp256, .esp384, .esp512, .ed25519,
        ])
    func newAlgorithms(_ algorithm: COSEAlgorithm) async throws {
        let engine = try engine(policy: VerificationPolicy(algorithms: [algorithm]))
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        let registered = try await register(engine, authenticator: authenticator, algorithm: algorithm)
        #expect(registered.credential.publicKey.algorithm == algorithm)
        let options = try await engine.startAuthentication(userHandle: user.id)
        let parts = try authenticator.authenticate(rpId: "example.com", origin: origin, challenge: options.challenge, credentialId: registered.credential.id)
        #expect(try await engine.finishAuthentication(parts.response).signCount == 1)
        // Not offered: refused at step 20.
        let other = try self.engine(policy: VerificationPolicy(algorithms: [.es256]))
        #expect(await errorCode { _ = try await register(other, algorithm: algorithm) } == "algorithm_not_allowed")
    }

    @Test("a secp256k1 key must say ES256K, and a P-256 key ES256 or ESP256")
    func curveAlgorithmPairs() throws {
        let k1 = try SigningKey.generate(.es256K).coseKey()
        let relabelled = k1.replacingLabel(COSE.Label.alg, with: CBOR(COSEAlgorithm.es256.rawValue))
        #expect(errorCode { _ = try COSEKey(bytes: CBOREncoder.encode(relabelled)) } == "cose_key_invalid")
        let p256 = try SigningKey.generate(.es256).coseKey()
        #expect(try COSEKey(bytes: CBOREncoder.encode(p256.replacingLabel(COSE.Label.alg, with: CBOR(-9)))).algorithm == .esp256)
        #expect(errorCode { _ = try COSEKey(bytes: CBOREncoder.encode(p256.replacingLabel(COSE.Label.alg, with: CBOR(-47)))) } == "cose_key_invalid")
    }

    @Test("ML-DSA keys: verified when the linked OpenSSL has ML-DSA, otherwise refused with algorithm_unsupported")
    func mlDSA() throws {
        let key = CBOR.map([
            CBORPair(CBOR(COSE.Label.kty), CBOR(COSE.KeyType.akp)), CBORPair(CBOR(COSE.Label.alg), CBOR(-48)),
            CBORPair(CBOR(COSE.Label.akpPub), .bytes([UInt8](repeating: 7, count: 1312))),
        ])
        let code = errorCode { _ = try COSEKey(bytes: CBOREncoder.encode(key)) }
        if MLDSAParameterSet.available {
            #expect(code == nil || code == "cose_key_invalid")
        } else {
            #expect(code == "algorithm_unsupported")
        }
        let short = key.replacingLabel(COSE.Label.akpPub, with: .bytes([1, 2, 3]))
        #expect(errorCode { _ = try COSEKey(bytes: CBOREncoder.encode(short)) } == (MLDSAParameterSet.available ? "cose_key_invalid" : "algorithm_unsupported"))
        #expect(COSEAlgorithm.mlDSA65.name == "ML-DSA-65" && COSEAlgorithm.esp256.name == "ESP256" && COSEAlgorithm.es256K.name == "ES256K")
    }
}

extension CBOR {
    /// The map with integer label `label` set to `value`.
    fileprivate func replacingLabel(_ label: Int, with value: CBOR) -> CBOR {
        guard case .map(let pairs) = self else { return self }
        return .map(pairs.map { $0.key == CBOR(label) ? CBORPair($0.key, value) : $0 })
    }
}

/// Credentials a re-audit flagged: they sign in by default, and the result says so; a policy refuses them.
@Suite("Engine: flagged credentials")
struct FlaggedCredentialTests {
    @Test("a flagged credential signs in with the flag and the risk signal; under .refuse it is refused after the signature")
    func flagged() async throws {
        for policy in [FlaggedCredentialPolicy.allow, .refuse] {
            let store = InMemoryCredentialStore()
            let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"], policy: VerificationPolicy(flaggedCredentials: policy))
            let engine = WebAuthnEngine(relyingParty: rp, credentials: store, challenges: InMemoryChallengeStore(clock: rp.clock))
            let user = UserEntity.new(name: "alice")
            let authenticator = SoftwareAuthenticator(profile: .securityKey)
            let options = try await engine.startRegistration(user: user)
            let parts = try authenticator.register(rpId: "example.com", origin: "https://example.com", challenge: options.challenge, userHandle: user.id)
            let id = try await engine.finishRegistration(parts.response).credential.id
            let flag = CredentialFlag(status: AuthenticatorStatus(rawValue: "USER_KEY_REMOTE_COMPROMISE"), authenticator: "Key", since: nil, attested: false)
            #expect(try await store.setFlag(flag, id: id))
            func signIn(tamper: Bool = false) async throws -> AuthenticationResult {
                let request = try await engine.startAuthentication(userHandle: user.id)
                var assertion = try authenticator.authenticate(
                    rpId: "example.com", origin: "https://example.com", challenge: request.challenge, credentialId: id)
                if tamper { assertion.signature[assertion.signature.count - 1] ^= 1 }
                return try await engine.finishAuthentication(assertion.response)
            }
            // Whoever lacks the key learns nothing of the flag.
            #expect(await errorCode { _ = try await signIn(tamper: true) } == "signature_invalid")
            if policy == .allow {
                let result = try await signIn()
                #expect(result.flag == flag && result.riskSignals.contains(.authenticatorCompromised))
            } else {
                #expect(await errorCode { _ = try await signIn() } == "credential_flagged")
                #expect(store.lookup(id: id)?.signCount == 0, "a refused sign-in changed the stored counter")
            }
        }
    }

    @Test("a registration keeps the attestation chain it presented")
    func chainKept() async throws {
        let engine = WebAuthnEngine(relyingParty: try RelyingParty(id: "example.com", origins: ["https://example.com"]))
        let user = UserEntity.new(name: "bob")
        let options = try await engine.startRegistration(user: user, attestation: .direct)
        let authority = try AttestationAuthority.generate()
        let parts = try SoftwareAuthenticator(profile: .securityKey).register(
            rpId: "example.com", origin: "https://example.com", challenge: options.challenge, userHandle: user.id, attestation: .fidoU2F(authority))
        let record = try await engine.finishRegistration(parts.response).credential
        #expect(record.attestationChain.count == 1)
        #expect(try X509Certificate(der: record.attestationChain[0]).der == record.attestationChain[0])
        let audit = CredentialAudit.flag(
            for: record,
            anchors: TrustAnchors(metadata: [
                MetadataEntry(
                    aaguid: nil, attestationCertificateKeyIdentifiers: [try #require(X509Certificate(der: record.attestationChain[0]).publicKeyIdentifier)],
                    description: "U2F key", rootCertificates: [], statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "REVOKED"))])
            ]), at: Date())
        #expect(audit?.status.rawValue == "REVOKED" && audit?.attested == true)
    }
}
