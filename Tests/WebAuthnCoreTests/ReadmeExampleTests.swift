import Foundation
import Testing
import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The library example of README.md, verbatim but for the software
/// authenticator that stands in for the browser.
@Suite("README example")
struct ReadmeExampleTests {
    @Test("the README's library example runs")
    func example() async throws {
        // --- README: configure once ---
        let rp = try RelyingParty(
            id: "example.com",
            name: "Example",
            origins: ["https://example.com"],
            policy: VerificationPolicy(userVerification: .preferred, counter: .reject))
        let engine = WebAuthnEngine(relyingParty: rp)  // in-memory stores; pass your own in production

        // --- README: registration ---
        let user = UserEntity.new(name: "alice@example.com", displayName: "Alice")
        let creation = try await engine.startRegistration(user: user)
        let optionsJSON = creation.json.serialized()  // send to the browser: PublicKeyCredential.parseCreationOptionsFromJSON
        #expect(optionsJSON.contains("\"challenge\""))
        let browser = SoftwareAuthenticator()
        let registrationBody: [UInt8] = try browser.register(
            rpId: rp.id, origin: "https://example.com", challenge: creation.challenge, userHandle: user.id).jsonBytes
        let registered = try await engine.finishRegistration(json: registrationBody)
        #expect(registered.attestationType == .none)

        // --- README: authentication (usernameless) ---
        let request = try await engine.startAuthentication()
        let assertionBody: [UInt8] = try browser.authenticate(
            rpId: rp.id, origin: "https://example.com", challenge: request.challenge, credentialId: registered.credential.id).jsonBytes
        do {
            let login = try await engine.finishAuthentication(json: assertionBody)
            #expect(login.userHandle == user.id)  // sign in login.userHandle
        } catch {
            Issue.record("\(error.code): \(error.message)")  // error.code is stable, e.g. signature_invalid
        }
    }
}
