import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// WebAuthn L3 §7.1, one test per step: each breaks exactly one thing.
@Suite("Registration (WebAuthn L3 §7.1)")
struct RegistrationStepTests {
    let h = Harness()

    @Test("a valid registration verifies, with what it verified")
    func valid() throws {
        let parts = try h.register()
        let result = try RegistrationVerifier.verify(parts.response, ceremony: h.registrationCeremony(), relyingParty: h.rp)
        #expect(result.format == "none")
        #expect(result.attestationType == AttestationType.none)
        #expect(result.credential.id == parts.id)
        #expect(result.credential.userHandle == h.user.id)
        #expect(result.backupEligible && result.backedUp && result.userVerified)
        #expect(result.credential.publicKey.algorithm == .es256)
        #expect(result.trust.trusted == false)
    }

    @Test("step 7: clientData.type must be webauthn.create")
    func step7Type() throws {
        var parts = try h.register()
        parts.clientData.type = "webauthn.get"
        #expect(h.verify(parts) == "client_data_type_mismatch")
    }

    @Test("step 8: clientData.challenge must be the issued challenge")
    func step8Challenge() throws {
        var parts = try h.register()
        parts.clientData.challenge = SecureRandom.bytes(32)
        #expect(h.verify(parts) == "challenge_mismatch")
        // As a string: another encoding of the same bytes is refused (red team, round 26).
        let issued = try h.register()
        for text in otherEncodings(of: issued.clientData.challenge) {
            var other = issued
            other.clientData.challengeText = text
            #expect(h.verify(other) == "challenge_mismatch", "\(text)")  // `none`: nothing signs the client data
        }
        #expect(h.verify(issued) == nil)
    }

    @Test(
        "step 9: clientData.origin must be an allowed origin, exactly",
        arguments: [
            "https://evil.example", "https://example.com:8443", "http://example.com", "https://sub.example.com", "https://example.com/",
        ])
    func step9Origin(origin: String) throws {
        var parts = try h.register()
        parts.clientData.origin = origin
        #expect(h.verify(parts) == "origin_not_allowed")
    }

    @Test("step 9: ports and Android app origins match when listed")
    func step9ListedOrigins() throws {
        let android = "android:apk-key-hash:" + Base64URL.encode(SecureRandom.bytes(32))
        let h2 = Harness(origins: ["https://example.com:8443", android])
        for origin in ["https://example.com:8443", android] {
            var parts = try h2.register()
            parts.clientData.origin = origin
            #expect(h2.verify(parts) == nil)
        }
    }

    @Test("step 10: crossOrigin true is refused unless the policy allows it")
    func step10CrossOrigin() throws {
        var parts = try h.register()
        parts.clientData.crossOrigin = true
        #expect(h.verify(parts) == "cross_origin_not_allowed")
        let allowing = Harness(policy: VerificationPolicy(crossOrigin: .allowAnyTopOrigin))
        var allowed = try allowing.register()
        allowed.clientData.crossOrigin = true
        #expect(allowing.verify(allowed) == nil)
    }

    @Test("step 11: topOrigin must be one of the allowed top-level origins")
    func step11TopOrigin() throws {
        let h2 = Harness(policy: VerificationPolicy(crossOrigin: .allowTopOrigins(["https://partner.example"])))
        var parts = try h2.register()
        parts.clientData.crossOrigin = true
        parts.clientData.topOrigin = "https://attacker.example"
        #expect(h2.verify(parts) == "top_origin_not_allowed")
        parts.clientData.topOrigin = nil
        #expect(h2.verify(parts) == "top_origin_not_allowed")
        parts.clientData.topOrigin = "https://partner.example"
        #expect(h2.verify(parts) == nil)
        var denied = try h.register()
        denied.clientData.topOrigin = "https://partner.example"
        #expect(h.verify(denied) == "top_origin_not_allowed")
    }

    @Test("step 13: the attestation object must decode, with attested credential data for the reported id")
    func step13AttestationObject() throws {
        var parts = try h.register()
        parts.attestationObjectOverride = [0xa1, 0x63]  // truncated map
        #expect(h.verify(parts) == "cbor_malformed")
        var noAT = try h.register()
        noAT.authenticatorData.flags.remove(.attestedCredentialData)
        noAT.authenticatorData.attested = nil
        #expect(h.verify(noAT) == "attested_credential_data_missing")
        var otherId = try h.register()
        otherId.id = SecureRandom.bytes(32)
        #expect(h.verify(otherId) == "credential_id_mismatch")
    }

    @Test("step 14: rpIdHash must be SHA-256 of the RP ID")
    func step14RpIdHash() throws {
        var parts = try h.register()
        parts.authenticatorData.rpIdHash = Digest.sha256(Array("evil.example".utf8))
        #expect(h.verify(parts) == "rp_id_hash_mismatch")
    }

    @Test("step 15: UP must be set unless the server issued the options for a conditional create")
    func step15UserPresent() throws {
        var parts = try h.register()
        parts.authenticatorData.flags.remove(.userPresent)
        #expect(h.verify(parts) == "user_presence_missing")
        #expect(h.verify(parts, ceremony: h.registrationCeremony(conditional: true)) == nil)
    }

    @Test("step 16: UV must be set when user verification is required")
    func step16UserVerified() throws {
        var parts = try h.register()
        parts.authenticatorData.flags.remove(.userVerified)
        #expect(h.verify(parts) == nil)
        #expect(h.verify(parts, ceremony: h.registrationCeremony(uv: .required)) == "user_verification_missing")
        let strict = Harness(policy: VerificationPolicy(userVerification: .required))
        var p2 = try strict.register()
        p2.authenticatorData.flags.remove(.userVerified)
        #expect(strict.verify(p2) == "user_verification_missing")
    }

    @Test("step 17: BS must not be set without BE")
    func step17BackupFlags() throws {
        var parts = try h.register()
        parts.authenticatorData.flags.remove(.backupEligible)
        #expect(h.verify(parts) == "backup_state_invalid")
    }

    @Test("step 20: the credential's alg must be one of pubKeyCredParams")
    func step20Algorithm() throws {
        let parts = try h.register(.edDSA)
        #expect(h.verify(parts, ceremony: h.registrationCeremony(algorithms: [.es256])) == "algorithm_not_allowed")
        #expect(h.verify(parts, ceremony: h.registrationCeremony(algorithms: [.es256, .edDSA])) == nil)
    }

    @Test("step 20: RS1 is refused unless the policy allows it")
    func step20RS1() throws {
        let parts = try h.register(.rs1)
        #expect(h.verify(parts, ceremony: h.registrationCeremony(algorithms: [.rs1])) == "algorithm_not_allowed")
        var allowing = h
        allowing.rp = testRP(policy: VerificationPolicy(allowInsecureRS1: true))
        #expect(allowing.verify(parts, ceremony: h.registrationCeremony(algorithms: [.rs1])) == nil)
    }

    @Test("step 22: an unknown fmt is refused with one error (a case-sensitive match)", arguments: ["Packed", "NONE", "tpm2", "x", "", "android-key "])
    func step22Format(format: String) throws {
        var parts = try h.register()
        parts.format = AttestationFormat(rawValue: format)
        #expect(h.verify(parts) == "attestation_format_unsupported")
    }

    @Test("step 23 (none, §8.7): attStmt must be empty")
    func step23None() throws {
        var parts = try h.register()
        parts.statement = .map([CBORPair(.text("x"), .null)])
        #expect(h.verify(parts) == "attestation_statement_malformed")
    }

    @Test("step 23 (packed self, §8.2 step 3): signature and alg", arguments: [COSEAlgorithm.es256, .es384, .es512, .edDSA, .ed448, .rs256, .ps256])
    func step23PackedSelf(alg: COSEAlgorithm) throws {
        let ceremony = h.registrationCeremony(algorithms: [alg])
        let parts = try h.register(alg, attestation: .packedSelf)
        #expect(h.verify(parts, ceremony: ceremony) == nil)
        var badSig = parts
        badSig.clientData.challenge = h.challenge  // unchanged client data, but a tampered authData byte:
        badSig.authenticatorData.signCount = 99
        #expect(h.verify(badSig, ceremony: ceremony) == "attestation_signature_invalid")
        var wrongAlg = parts
        wrongAlg.statement = .map((parts.statement.mapValue ?? []).map { $0.key == .text("alg") ? CBORPair(.text("alg"), CBOR(-999)) : $0 })
        #expect(h.verify(wrongAlg, ceremony: ceremony) != nil)
    }

    @Test("step 23 (packed full, §8.2 step 2): a valid x5c verifies as basic, untrusted")
    func step23PackedFull() throws {
        var h2 = h
        h2.rp = testRP()
        let parts = try packed("valid")
        let result = try RegistrationVerifier.verify(parts.response, ceremony: h2.registrationCeremony(), relyingParty: h2.rp)
        #expect(result.attestationType == .basic)
        #expect(result.trust.trusted == false)
        #expect(result.trust.certificateChain.count == 1)
        #expect(result.riskSignals.contains(.attestationUntrusted))
        var tampered = parts
        tampered.authenticatorData.signCount = 7
        #expect(h.verify(tampered) == "attestation_signature_invalid")
    }

    /// A packed registration with the AAGUID of the test certificates and `certificate` in x5c.
    func packed(_ certificate: String) throws -> RegistrationParts {
        var parts = try h.register(attestation: .packed(x5c: [PackedCertificates.der(certificate)], signer: PackedCertificates.signer))
        parts.authenticatorData.attested!.aaguid = PackedCertificates.aaguid.bytes
        try SoftwareAuthenticator.Attestation.resignPacked(&parts, signer: PackedCertificates.signer)
        return parts
    }

    @Test(
        "§8.2.1: each attestation certificate requirement is enforced",
        arguments: [
            ("no-aaguid", nil), ("wrong-ou", "attestation_certificate_invalid"), ("no-country", "attestation_certificate_invalid"),
            ("ca-true", "attestation_certificate_invalid"), ("no-basic-constraints", "attestation_certificate_invalid"),
            ("version1", "attestation_certificate_invalid"), ("aaguid-critical", "attestation_certificate_invalid"),
            ("aaguid-mismatch", "attestation_aaguid_mismatch"), ("expired", "certificate_expired"),
        ] as [(String, String?)])
    func certificateRequirements(certificate: String, expected: String?) throws {
        #expect(h.verify(try packed(certificate)) == expected)
    }

    @Test("steps 24–25: accepted attestation types and required trust are policy")
    func step25Trust() throws {
        var selfOnly = h
        selfOnly.rp = testRP(policy: VerificationPolicy(attestation: AttestationPolicy(acceptedTypes: [.none, .basic])))
        #expect(selfOnly.verify(try h.register(attestation: .packedSelf)) == "attestation_type_not_allowed")
        var requiring = h
        requiring.rp = testRP(policy: VerificationPolicy(attestation: AttestationPolicy(requireTrustedAttestation: true)))
        #expect(requiring.verify(try packed("valid")) == "attestation_untrusted")
        #expect(requiring.verify(try h.register(attestation: .packedSelf)) == nil)
        #expect(requiring.verify(try h.register()) == nil)
    }

    @Test("step 26: credential IDs longer than 1023 bytes are refused")
    func step26CredentialIdLength() throws {
        #expect(errorCode { try RegistrationVerifier.verifyCredentialIdLength([UInt8](repeating: 1, count: 1023)) } == nil)
        #expect(errorCode { try RegistrationVerifier.verifyCredentialIdLength([UInt8](repeating: 1, count: 1024)) } == "credential_id_too_long")
        let long = try h.authenticator.register(
            rpId: h.rp.id, origin: Harness.origin, challenge: h.challenge, userHandle: h.user.id,
            credentialIdLength: 1024)
        #expect(h.verify(long) == "credential_id_too_long")
        #expect(errorCode { _ = try RegistrationResponse(json: long.json) } == "credential_id_too_long")
    }
}
