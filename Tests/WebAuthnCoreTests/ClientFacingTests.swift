import Foundation
import Testing
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

/// What an embedding server shows a client, through the engine's public API only (an
/// adopter's review: the folding and the statuses lived in `WebAuthnServer`, internal, and the
/// docs said to return every error to the client as it is).
@Suite("Client-facing errors: folding and HTTP statuses for servers of their own")
struct ClientFacingTests {
    @Test("a sign-in failure after the credential lookup reads authentication_failed; its shape errors stay; the server's own say only that it failed")
    func folding() {
        let folded: [WebAuthnError.Code] = [
            .credentialUnknown, .signatureInvalid, .credentialNotOwnedByUser, .counterRegression, .originNotAllowed, .cryptoFailure,
        ]
        for code in folded {
            let shown = WebAuthnError(code, "detail naming a credential").clientFacing(.authentication)
            #expect(shown.code == .authenticationFailed && shown.httpStatus == 401 && !shown.message.contains("naming"), "\(code)")
        }
        for code in [WebAuthnError.Code.challengeExpired, .responseMalformed, .sessionMismatch, .inputTooLarge] {
            let error = WebAuthnError(code, "detail")
            #expect(error.clientFacing(.authentication).code == code, "\(code)")
        }
        for code in [WebAuthnError.Code.storageFailure, .internalError, .configurationInvalid] {
            for view in [WebAuthnError.ClientView.registration, .authentication] {
                let shown = WebAuthnError(code, "postgres at 10.0.0.5 refused").clientFacing(view, requestID: "r-1")
                #expect(shown.code == .internalError && shown.message == "the server failed; quote request id r-1" && shown.httpStatus == 500)
            }
        }
        // A registration's failures are the user's own: shown as they are.
        let taken = WebAuthnError(.usernameUnavailable, "the name is taken")
        #expect(taken.clientFacing(.registration) == taken && taken.clientFacing(.registration).httpStatus == 409)
        #expect(WebAuthnError(.signatureInvalid, "x").clientFacing(.registration).code == .signatureInvalid)
        #expect(WebAuthnError(.cryptoFailure, "x").clientFacing(.registration).code == .internalError)
    }

    @Test("statuses: 400 by default, 401, 403, 409, 413, 415, 429, 503, 500")
    func statuses() {
        let expected: [(WebAuthnError.Code, Int)] = [
            (.challengeMismatch, 400), (.signatureInvalid, 401), (.signInRequired, 401), (.sessionMismatch, 403), (.usernameUnavailable, 409),
            (.inputTooLarge, 413), (.contentTypeUnsupported, 415), (.rateLimited, 429), (.tooManyPendingCeremonies, 503), (.storageFailure, 500),
        ]
        for (code, status) in expected { #expect(WebAuthnError(code, "").httpStatus == status, "\(code)") }
    }

    @Test("a new account without an account store is refused when the registration starts, not after the passkey is made")
    func newAccountNeedsAccountStore() async throws {
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"])
        let engine = WebAuthnEngine(relyingParty: rp, credentials: InMemoryCredentialStore(), challenges: InMemoryChallengeStore())
        await #expect(throws: WebAuthnError(.configurationInvalid, "")) {
            _ = try await engine.startRegistration(user: UserEntity.new(name: "alice", displayName: "Alice"), newAccount: true)
        }
        _ = try await engine.startRegistration(user: UserEntity.new(name: "alice", displayName: "Alice"))  // a host's own user
    }

    @Test("stand-in credentials: the same for a name (its look-alikes too) under one secret, recognised, refused with a short secret")
    func standIns() throws {
        #expect(throws: WebAuthnError(.configurationInvalid, "")) { _ = try StandInCredentials(secret: [1, 2, 3]) }
        let standIns = try StandInCredentials(secret: Array(repeating: 7, count: 32))
        let other = try StandInCredentials(secret: Array(repeating: 8, count: 32))
        #expect(standIns.credentials(for: "alice") == standIns.credentials(for: "ALICE"))
        // A name's two letter cases, which find one account, get one set: with the look-alike key,
        // Богдан and богдан got two (red team, thirty-second pass re-check).
        for (capital, small) in [("Богдан", "богдан"), ("Григорий", "григорий"), ("Βασίλης", "βασίλης"), ("Борис", "борис")] {
            #expect(standIns.credentials(for: capital) == standIns.credentials(for: small), "\(capital)")
            #expect(standIns.userHandle(for: capital) == standIns.userHandle(for: small), "\(capital)")
        }
        #expect(standIns.userHandle(for: "alice") == standIns.userHandle(for: "alice") && standIns.userHandle(for: "alice") != other.userHandle(for: "alice"))
        let ids = standIns.credentials(for: "alice").map(\.id)
        #expect(!ids.isEmpty && ids.allSatisfy { standIns.isStandIn($0) && !other.isStandIn($0) && (16...64).contains($0.count) })
        #expect(!standIns.isStandIn(Array(repeating: 1, count: 32)))
    }

    @Test("allowCredentials lists each credential's transports sorted and once, as the stand-ins' are")
    func transportsSorted() async throws {
        // Red team, thirty-second pass: in the order a client had sent them, `["internal","hybrid"]`
        // was only ever a real credential's; the stand-ins' are sorted.
        let engine = WebAuthnEngine(relyingParty: try RelyingParty(id: "example.com", origins: ["https://example.com"]))
        let standIns = try StandInCredentials(secret: Array(repeating: 7, count: 32))
        let real = CredentialDescriptor(id: [1, 2, 3], transports: [.internal, .hybrid, .internal])
        let options = try await engine.startAuthentication(allowCredentials: [real] + standIns.credentials(for: "alice") + standIns.credentials(for: "bob"))
        let listed = try JSONValue.parse(options.jsonBytes)["allowCredentials"]?.arrayValue ?? []
        #expect(listed.first?["transports"] == ["hybrid", "internal"])
        #expect(listed.count > 2)
        for descriptor in listed {
            let transports = descriptor["transports"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(transports == Array(Set(transports)).sorted(), "\(transports)")
        }
    }

    @Test("the pure verifiers refuse a ceremony past its expiry, and one bound to another session")
    func pureVerifiersCheckExpiryAndBinding() throws {
        // An adopter's review: they did neither, and code keeping its own ceremonies took expired ones.
        let now = Date(timeIntervalSince1970: 1_900_000_000)
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"], clock: .fixed(now))
        let authenticator = SoftwareAuthenticator()
        let challenge = Array(repeating: UInt8(7), count: 32)
        let parts = try authenticator.register(rpId: "example.com", origin: "https://example.com", challenge: challenge, userHandle: [1])
        func ceremony(_ kind: PendingCeremony.Kind, expiresAt: Date, binding: [UInt8]? = [9]) throws -> PendingCeremony {
            PendingCeremony(
                kind: kind, challenge: challenge, user: kind == .registration ? try UserEntity(id: [1], name: "a") : nil, userVerification: .preferred,
                binding: binding, expiresAt: expiresAt)
        }
        let late = try ceremony(.registration, expiresAt: now.addingTimeInterval(-1))
        #expect(throws: WebAuthnError(.challengeExpired, "")) {
            _ = try RegistrationVerifier.verify(parts.response, ceremony: late, relyingParty: rp, binding: [9])
        }
        let open = try ceremony(.registration, expiresAt: now.addingTimeInterval(60))
        #expect(throws: WebAuthnError(.sessionMismatch, "")) {
            _ = try RegistrationVerifier.verify(parts.response, ceremony: open, relyingParty: rp, binding: [8])
        }
        #expect(throws: WebAuthnError(.sessionMismatch, "")) { _ = try RegistrationVerifier.verify(parts.response, ceremony: open, relyingParty: rp) }
        let record = try RegistrationVerifier.verify(parts.response, ceremony: open, relyingParty: rp, binding: [9]).credential

        let assertion = try authenticator.authenticate(rpId: "example.com", origin: "https://example.com", challenge: challenge, credentialId: record.id)
        let lateSignIn = try ceremony(.authentication, expiresAt: now.addingTimeInterval(-1), binding: nil)
        #expect(throws: WebAuthnError(.challengeExpired, "")) {
            _ = try AuthenticationVerifier.verify(assertion.response, ceremony: lateSignIn, credential: record, relyingParty: rp)
        }
        let signIn = try ceremony(.authentication, expiresAt: now.addingTimeInterval(60))
        #expect(throws: WebAuthnError(.sessionMismatch, "")) {
            _ = try AuthenticationVerifier.verify(assertion.response, ceremony: signIn, credential: record, relyingParty: rp, binding: [8])
        }
        #expect(try AuthenticationVerifier.verify(assertion.response, ceremony: signIn, credential: record, relyingParty: rp, binding: [9]).userHandle == [1])
    }

    @Test("a credential record serializes for a store of one's own: every field round-trips, its flag included; damage reads as storage_failure")
    func recordSerialization() throws {
        let now = Date(timeIntervalSince1970: 1_900_000_000.25)
        let rp = try RelyingParty(id: "example.com", origins: ["https://example.com"], clock: .fixed(now))
        let authority = try AttestationAuthority.generate()
        let challenge = Array(repeating: UInt8(3), count: 32)
        let parts = try SoftwareAuthenticator(profile: .securityKey).register(
            rpId: "example.com", origin: "https://example.com", challenge: challenge, userHandle: [1], attestation: .packedFull(authority))
        let ceremony = PendingCeremony(
            kind: .registration, challenge: challenge, user: try UserEntity(id: [1], name: "a"), userVerification: .preferred, expiresAt: .distantFuture)
        var record = try RegistrationVerifier.verify(parts.response, ceremony: ceremony, relyingParty: rp).credential
        record.name = "Work key"
        record.lastUsedAt = now.addingTimeInterval(12.5)
        record.flag = CredentialFlag(status: .revoked, authenticator: "Key", since: now, attested: true)
        #expect(!record.attestationChain.isEmpty && !record.transports.isEmpty)
        let read = try CredentialRecord(serialized: record.serialized)
        #expect(read.serialized == record.serialized)
        #expect(read.id == record.id && read.publicKey.bytes == record.publicKey.bytes && read.attestationChain == record.attestationChain)
        #expect(read.flag == record.flag && read.name == "Work key" && read.lastUsedAt == record.lastUsedAt && read.createdAt == now)
        for damaged in ["", "{}", #"{"v":2}"#, "[1]"] {
            #expect(throws: WebAuthnError(.storageFailure, "")) { _ = try CredentialRecord(serialized: Array(damaged.utf8)) }
        }
        // A counter outside UInt32 is refused, as a SQL store's row is.
        let text = String(decoding: record.serialized, as: UTF8.self).replacingOccurrences(of: #""sign_count":0"#, with: #""sign_count":4294967296"#)
        #expect(text.contains("4294967296"))
        #expect(throws: WebAuthnError(.storageFailure, "")) { _ = try CredentialRecord(serialized: Array(text.utf8)) }
    }
}
