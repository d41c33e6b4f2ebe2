import Foundation
@testable import WebAuthnCore
@testable import _WebAuthnEncoding
@testable import _WebAuthnCrypto
@testable import WebAuthnMetadata
@testable import WebAuthnTesting

// MARK: Whole ceremonies through WebAuthnEngine

/// Each input gets a fresh engine (in-memory stores, RP ID example.com, the
/// fixed clock) holding the fixed credentials and one pending ceremony for the
/// fixed challenge. Property: a response that succeeds once fails the second
/// time (the challenge is consumed exactly once).
let ceremonyTargets: [FuzzTarget] = [
    FuzzTarget(name: "registration", input: "a registration response body (RegistrationResponseJSON) for the fixed challenge") { data in
        let json = data.bytes
        let engine = Fixtures.engine(pending: .registration)
        let first = blocking({ _ = try await engine.finishRegistration(json: json) })
        note("registration", describe(first))
        guard first == nil else { return }
        guard blocking({ _ = try await engine.finishRegistration(json: json) }) != nil else {
            finding("a registration response was accepted twice")
        }
    },
    FuzzTarget(name: "registration-object", input: "an attestationObject, sent with valid clientDataJSON for the fixed challenge") { data in
        let attestationObject = data.bytes
        // The response's id is the credential ID in authData, so the ceremony gets past that check.
        let id = (try? AttestationObject(bytes: attestationObject))?.authenticatorData.attestedCredentialData?.credentialId ?? [1, 2, 3, 4]
        let response = RegistrationResponse(
            id: id, clientDataJSON: Fixtures.createClientData.bytes, attestationObject: attestationObject,
            transports: ["usb"])
        let engine = Fixtures.engine(pending: .registration)
        let first = blocking({ _ = try await engine.finishRegistration(response) })
        note("registration-object", describe(first))
        guard first == nil else { return }
        guard blocking({ _ = try await engine.finishRegistration(response) }) != nil else {
            finding("a registration response was accepted twice")
        }
    },
    FuzzTarget(name: "authentication", input: "an authentication response body (AuthenticationResponseJSON) for the fixed challenge and credentials") { data in
        let json = data.bytes
        let engine = Fixtures.engine(pending: .authentication)
        let first = blocking({ _ = try await engine.finishAuthentication(json: json) })
        note("authentication", describe(first))
        guard first == nil else { return }
        guard blocking({ _ = try await engine.finishAuthentication(json: json) }) != nil else {
            finding("an assertion was accepted twice")
        }
    },
    FuzzTarget(name: "authentication-data", input: "authenticator data; the target signs it with the ES256 credential's key over valid clientDataJSON") {
        data in
        let authenticatorData = data.bytes
        let credential = Fixtures.credentialKeys[0]
        let clientDataJSON = Fixtures.getClientData.bytes
        guard let signature = try? credential.key.sign(authenticatorData, Digest.sha256(clientDataJSON)) else { finding("signing failed") }
        let response = AuthenticationResponse(
            id: credential.id, clientDataJSON: clientDataJSON, authenticatorData: authenticatorData,
            signature: signature, userHandle: Fixtures.userHandle)
        let engine = Fixtures.engine(pending: .authentication)
        let first = blocking({ _ = try await engine.finishAuthentication(response) })
        note("authentication-data", describe(first))
        guard first == nil else { return }
        guard blocking({ _ = try await engine.finishAuthentication(response) }) != nil else {
            finding("an assertion was accepted twice")
        }
    },
]
