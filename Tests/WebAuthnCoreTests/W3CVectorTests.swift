import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Every vector of the W3C WebAuthn L3 appendix (TestVectors/w3c): the
/// registration verifies, then the authentication with the key it produced.
@Suite("W3C WebAuthn L3 test vectors")
struct W3CVectorTests {
    @Test("the w3c folder holds its vectors (an empty folder would pass the parameterised tests vacuously)")
    func folderHoldsVectors() { #expect(Self.files.count >= 15, "\(Self.files.count) vectors in TestVectors/w3c") }

    static let files = Vectors.files("w3c").filter { $0 != "w3c-attestation-ca.json" }
    /// The spec's attestation CA: every W3C vector with x5c chains to it.
    static let attestationCA = try! X509Certificate(pem: Vectors.load("w3c/w3c-attestation-ca.json")["derived"]!["attestation_ca_cert_pem"]!.stringValue!)
    static let anchors = TrustAnchors(
        formatRoots: Dictionary(uniqueKeysWithValues: ["packed", "tpm", "android-key", "apple", "fido-u2f"].map { ($0, [attestationCA]) }))

    struct Setup {
        let vector: JSONValue
        let rp: RelyingParty
        let registrationCeremony: PendingCeremony
        let authenticationCeremony: PendingCeremony
        let user: UserEntity
    }

    static func setup(_ file: String, crossOrigin: CrossOriginPolicy? = nil) -> Setup {
        let v = Vectors.load("w3c/" + file)
        let clientData = v["derived"]!["registration_clientData"]!
        let derivedPolicy: CrossOriginPolicy
        if let top = clientData["topOrigin"]?.stringValue {
            derivedPolicy = .allowTopOrigins([top])
        } else {
            derivedPolicy = clientData["crossOrigin"]?.boolValue == true ? .allowAnyTopOrigin : .deny
        }
        let alg = COSEAlgorithm(v["credential_algorithm"]!["cose"]!.intValue!)
        let rp = try! RelyingParty(
            id: v["rpId"]!.stringValue!, origins: [v["origin"]!.stringValue!],
            policy: VerificationPolicy(crossOrigin: crossOrigin ?? derivedPolicy, algorithms: [alg]),
            clock: .fixed(Date(timeIntervalSince1970: 1_893_456_000)), trustAnchors: anchors)
        let user = try! UserEntity(id: [1, 2, 3], name: "w3c")
        let reg = PendingCeremony(
            kind: .registration, challenge: Vectors.hex(v["registration"]!["spec_fields"]!["challenge"]),
            user: user, algorithms: [alg], userVerification: .preferred, expiresAt: .distantFuture)
        let auth = PendingCeremony(
            kind: .authentication, challenge: Vectors.hex(v["authentication"]!["spec_fields"]!["challenge"]),
            userHandle: user.id, userVerification: .preferred, expiresAt: .distantFuture)
        return Setup(vector: v, rp: rp, registrationCeremony: reg, authenticationCeremony: auth, user: user)
    }

    @Test("registration then authentication verify", arguments: files)
    func registrationThenAuthentication(file: String) throws {
        let s = Self.setup(file)
        let id = s.vector["id"]!.stringValue!
        let expected = Vectors.expectation(id)
        let registration = try RegistrationResponse(json: s.vector["webauthn_json"]!["registration"]!)
        if expected.result == "failure" {
            #expect(errorCode { _ = try RegistrationVerifier.verify(registration, ceremony: s.registrationCeremony, relyingParty: s.rp) } == expected.error)
            return
        }
        let result = try RegistrationVerifier.verify(registration, ceremony: s.registrationCeremony, relyingParty: s.rp)
        let derived = s.vector["derived"]!["registration_authData"]!
        #expect(result.format.rawValue == s.vector["attestation_format"]!.stringValue!)
        #expect(result.credential.id == Vectors.hex(s.vector["registration"]!["spec_fields"]!["credential_id"]))
        #expect(result.credential.publicKey.bytes == Vectors.hex(derived["credentialPublicKey"]))
        #expect(result.credential.aaguid.bytes == Vectors.hex(derived["aaguid"]))
        #expect(result.backupEligible == derived["flags_decoded"]!["BE"]!.boolValue!)
        #expect(result.userVerified == derived["flags_decoded"]!["UV"]!.boolValue!)
        let row = Vectors.expectations[id]!
        #expect(result.attestationType.rawValue == row["attestationType"]!.stringValue!)
        #expect(result.trust.trusted == row["trusted"]!.boolValue!, "\(result.trust.reason)")

        let assertion = try AuthenticationResponse(json: s.vector["webauthn_json"]!["authentication"]!)
        let auth = try AuthenticationVerifier.verify(assertion, ceremony: s.authenticationCeremony, credential: result.credential, relyingParty: s.rp)
        #expect(auth.signCount == UInt32(s.vector["authentication"]!["expected"]!["new_signCount"]!.intValue!))
        #expect(auth.credentialId == result.credential.id)
    }

    static let crossOriginFiles = files.filter { $0.contains("crossOrigin") || $0.contains("topOrigin") }

    @Test("cross-origin vectors are refused by the default policy", arguments: crossOriginFiles)
    func crossOriginRefusedByDefault(file: String) throws {
        let s = Self.setup(file, crossOrigin: .deny)
        let registration = try RegistrationResponse(json: s.vector["webauthn_json"]!["registration"]!)
        #expect(
            errorCode { _ = try RegistrationVerifier.verify(registration, ceremony: s.registrationCeremony, relyingParty: s.rp) } == "cross_origin_not_allowed")
    }

    @Test("the topOrigin vector is refused when its top origin is not listed")
    func topOriginNotListed() throws {
        let s = Self.setup("w3c-none-es256-topOrigin.json", crossOrigin: .allowTopOrigins(["https://other.example"]))
        let registration = try RegistrationResponse(json: s.vector["webauthn_json"]!["registration"]!)
        #expect(
            errorCode { _ = try RegistrationVerifier.verify(registration, ceremony: s.registrationCeremony, relyingParty: s.rp) } == "top_origin_not_allowed")
    }
}
