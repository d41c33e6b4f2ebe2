import ArgumentParser
import Foundation
import WebAuthnCore
import WebAuthnTesting
import WebAuthnConformance
import _WebAuthnEncoding

/// Runs full ceremonies in one process, against a software authenticator,
/// and prints each verdict: the quickest way to see the engine work.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a full registration and sign-in against a software authenticator and print each step.")

    @Option(name: .customLong("rp-id"), help: "The RP ID.") var rpId = "localhost"
    @Option(help: "The origin.") var origin = "http://localhost:8080"

    func run() async throws {
        let rp = try RelyingParty(id: rpId, name: "WebAuthn demo", origins: [origin])
        let engine = WebAuthnEngine(relyingParty: rp)
        let user = UserEntity.new(name: "alice@example.com", displayName: "Alice")
        func say(_ step: String, _ detail: JSONValue) { print("\(step): \(detail.serialized())") }

        for (label, profile, attestation, alg) in [
            ("passkey", SoftwareAuthenticator.Profile.platformPasskey, SoftwareAuthenticator.Attestation.none, COSEAlgorithm.es256),
            ("security key", .securityKey, .packedSelf, .edDSA),
        ] {
            let authenticator = SoftwareAuthenticator(profile: profile)
            let creation = try await engine.startRegistration(user: user)
            say("1. \(label): creation options", creation.json)
            let registration = try authenticator.register(
                rpId: rp.id, origin: origin, challenge: creation.challenge,
                userHandle: user.id, algorithm: alg, attestation: attestation)
            let registered = try await engine.finishRegistration(json: registration.jsonBytes)
            say(
                "2. \(label): registered",
                [
                    "fmt": .string(registered.format.rawValue), "attestationType": .string(registered.attestationType.rawValue),
                    "credentialId": .string(Base64URL.encode(registered.credential.id)),
                    "alg": .string(registered.credential.publicKey.algorithm.name), "backupEligible": .bool(registered.backupEligible),
                ])
            for round in 1...2 {
                let request = try await engine.startAuthentication(userHandle: round == 1 ? nil : user.id)
                let assertion = try authenticator.authenticate(
                    rpId: rp.id, origin: origin, challenge: request.challenge,
                    credentialId: registered.credential.id)
                let result = try await engine.finishAuthentication(json: assertion.jsonBytes)
                say(
                    "3. \(label): signed in (\(round == 1 ? "discoverable" : "with username"))",
                    [
                        "signCount": .number(Double(result.signCount)), "userVerified": .bool(result.userVerified),
                        "backedUp": .bool(result.backedUp),
                    ])
                if round == 2 {
                    do {
                        _ = try await engine.finishAuthentication(json: assertion.jsonBytes)
                        say("4. \(label): replay", ["verdict": "ACCEPTED (this is a bug)"])
                        throw ExitCode(1)
                    } catch let error as WebAuthnError {
                        say("4. \(label): replay refused", ["error": .string(error.code.rawValue), "message": .string(error.message)])
                    }
                }
            }
        }
        print("demo: every ceremony verified; the replay was refused")
    }
}
