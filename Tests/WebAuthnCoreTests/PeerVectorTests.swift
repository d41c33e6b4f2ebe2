import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The real-device and conformance vectors from peer libraries' suites
/// (TestVectors/realworld) and the negatives (TestVectors/negative). The
/// verdict and set-up for each is in TestVectors/expectations.json.
@Suite("Peer and negative vectors")
struct PeerVectorTests {
    @Test("the realworld and negative folders hold their vectors (empty folders would pass vacuously)")
    func foldersHoldVectors() {
        #expect(Self.realworld.count >= 50, "\(Self.realworld.count) vectors in TestVectors/realworld")
        #expect(Self.negative.count >= 40, "\(Self.negative.count) vectors in TestVectors/negative")
    }

    static let realworld = Vectors.files("realworld").map { "realworld/" + $0 }
    static let negative = Vectors.files("negative").map { "negative/" + $0 }

    struct Outcome {
        var error: String?
        var type: AttestationType?
        var trusted: Bool?
    }

    /// The relying party a vector's peer test configured: its origins, its
    /// time, the built-in roots plus the roots the vector names, the policy switches of its row.
    static func relyingParty(_ v: JSONValue, rpId: String) -> RelyingParty {
        let e = v["expected"]!
        let row = Vectors.expectations[v["id"]!.stringValue!]!
        let at = Vectors.date(row["at"]) ?? Vectors.date(v["verification_time"]?["value"]) ?? Date()
        let uv: UserVerificationRequirement = e["require_user_verification"]?.boolValue == true ? .required : .preferred
        let requireTrust = row["error"]?.stringValue == "attestation_untrusted"
        var anchors = TrustAnchors.builtIn
        let format = AttestationFormat(rawValue: v["attestation_format"]?.stringValue ?? "")
        let named = (v["trust_roots"]?.arrayValue ?? []).compactMap { $0["pem"]?.stringValue }.map { try! X509Certificate(pem: $0) }
        if !named.isEmpty { anchors.formatRoots[format, default: []] += named }
        if requireTrust { anchors.formatRoots[format] = [W3CVectorTests.attestationCA] }
        let policy = VerificationPolicy(
            userVerification: uv, algorithms: COSEAlgorithm.supported,
            allowInsecureRS1: row["allowInsecureRS1"]?.boolValue == true,
            attestation: AttestationPolicy(
                requireTrustedAttestation: requireTrust,
                requireSafetyNetCTSProfileMatch: row["requireSafetyNetCTSProfileMatch"]?.boolValue ?? true))
        return try! RelyingParty(id: rpId, origins: Vectors.strings(e["origin"]), policy: policy, clock: .fixed(at), trustAnchors: anchors)
    }

    /// Runs one vector the way its peer test set it up. `repairId` replaces
    /// the client-reported id with authData's credential ID.
    static func run(_ v: JSONValue, rpId: String, repairId: Bool = false, challengeOverride: [UInt8]? = nil) -> Outcome {
        let e = v["expected"]!
        let row = Vectors.expectations[v["id"]!.stringValue!]!
        let rp = relyingParty(v, rpId: rpId)
        var outcome = Outcome()
        if row["harness"]?.stringValue == "format-only" {
            outcome.error = errorCode {
                let response = try RegistrationResponse(json: v["response"]!)
                let object = try AttestationObject(bytes: response.attestationObject)
                let verification = try AttestationFormats.verifier(for: object.format).verify(
                    AttestationInput(
                        statement: object.statement, authenticatorData: object.authenticatorData,
                        clientDataHash: Digest.sha256(response.clientDataJSON), policy: rp.policy, now: rp.clock.now()))
                let (trust, type) = try RegistrationVerifier.assessTrustworthiness(
                    verification, format: object.format, aaguid: object.authenticatorData.attestedCredentialData!.aaguid, rp: rp)
                outcome.type = type
                outcome.trusted = trust.trusted
            }
            return outcome
        }
        // A peer's accepting challenge callback: the challenge is the one in clientDataJSON.
        let issued = e["challenge_b64url"]?.stringValue ?? e["challenge_b64url_from_clientDataJSON"]?.stringValue ?? ""
        let challenge = challengeOverride ?? Base64URL.decode(issued) ?? []
        var json = v["response"]!
        outcome.error = errorCode {
            if v["ceremony"]!.stringValue! == "registration" {
                if repairId {
                    let object = try AttestationObject(bytes: Vectors.b64(json["response"]!["attestationObject"]))
                    let id = Base64URL.encode(object.authenticatorData.attestedCredentialData!.credentialId)
                    var top = json.objectValue!
                    top["id"] = .string(id)
                    top["rawId"] = .string(id)
                    json = .object(top)
                }
                let response = try RegistrationResponse(json: json)
                let ceremony = PendingCeremony(
                    kind: .registration, challenge: challenge, user: try UserEntity(id: [9], name: "peer"),
                    algorithms: rp.policy.algorithms, userVerification: rp.policy.userVerification, expiresAt: .distantFuture)
                let result = try RegistrationVerifier.verify(response, ceremony: ceremony, relyingParty: rp)
                outcome.type = result.attestationType
                outcome.trusted = result.trust.trusted
            } else {
                let response = try AuthenticationResponse(json: json)
                let key = try COSEKey(bytes: Vectors.b64(e["credentialPublicKey_cose_b64url"]))
                let authData = try AuthenticatorData(bytes: response.authenticatorData)
                let owner = response.userHandle ?? [9]
                let record = CredentialRecord(
                    id: response.id, userHandle: owner, publicKey: key,
                    signCount: UInt32(e["stored_sign_count"]?.intValue ?? 0), uvInitialized: false,
                    backupEligible: authData.backupEligible, backupState: authData.backedUp, createdAt: rp.clock.now())
                let ceremony = PendingCeremony(
                    kind: .authentication, challenge: challenge, userHandle: owner,
                    userVerification: rp.policy.userVerification, expiresAt: .distantFuture)
                _ = try AuthenticationVerifier.verify(response, ceremony: ceremony, credential: record, relyingParty: rp)
            }
        }
        return outcome
    }

    static func check(_ outcome: Outcome, against row: JSONValue) {
        if let type = row["attestationType"]?.stringValue { #expect(outcome.type?.rawValue == type) }
        if let trusted = row["trusted"]?.boolValue { #expect(outcome.trusted == trusted) }
    }

    @Test("real-device vectors give the expected verdict", arguments: realworld)
    func realworldVector(path: String) throws {
        let v = Vectors.load(path)
        let row = Vectors.expectations[v["id"]!.stringValue!]!
        let expected = Vectors.expectation(v["id"]!.stringValue!)
        // The py_webauthn SafetyNet vector names no RP ID (its peer calls the format verifier directly).
        let named = Vectors.strings(v["expected"]!["rpId"])
        let rpIds = named.isEmpty ? ["example.com"] : named
        switch expected.result {
        case "success":
            // An RP has one RP ID; for a peer's list, exactly the matching one verifies.
            let outcomes = rpIds.map { Self.run(v, rpId: $0) }
            let verified = outcomes.filter { $0.error == nil }
            #expect(verified.count == 1, "\(outcomes.map { $0.error ?? "ok" })")
            #expect(outcomes.allSatisfy { $0.error == nil || $0.error == "rp_id_hash_mismatch" }, "\(outcomes.map { $0.error ?? "ok" })")
            if let outcome = verified.first { Self.check(outcome, against: row) }
        case "failure":
            #expect(Self.run(v, rpId: rpIds[0]).error == expected.error)
            if expected.repaired == "success" {
                let repaired = Self.run(v, rpId: rpIds[0], repairId: true)
                #expect(repaired.error == nil)
                Self.check(repaired, against: row)
            }
        default:  // parse-only: the response and its authenticator extensions decode.
            let response = try AuthenticationResponse(json: v["response"]!)
            let authData = try AuthenticatorData(bytes: response.authenticatorData)
            #expect(authData.extensions != nil)
        }
    }

    @Test("negative vectors fail with the expected code", arguments: negative)
    func negativeVector(path: String) throws {
        let v = Vectors.load(path)
        let e = v["expected"]!
        let expected = Vectors.expectation(v["id"]!.stringValue!)
        let rpId = Vectors.strings(e["rpId"])[0]
        if let types = e["type"] {
            // The peer's custom expected type: run the type step with each.
            let clientData = try CollectedClientData(bytes: Vectors.b64(v["response"]!["response"]!["clientDataJSON"]))
            for type in Vectors.strings(types) {
                #expect(errorCode { try ClientDataChecks.verifyType(clientData, expected: type, step: "") } == expected.error)
            }
            return
        }
        // A peer callback that rejects the challenge: a ceremony with another challenge.
        let other: [UInt8]? = e["challenge_peer_expression"] != nil ? [UInt8](repeating: 7, count: 32) : nil
        #expect(Self.run(v, rpId: rpId, challengeOverride: other).error == expected.error)
    }
}
