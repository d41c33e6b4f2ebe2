import Foundation
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Builds valid, signed responses with the software authenticator so a test
/// can break exactly one thing and see exactly one step fail.
struct Harness {
    var rp: RelyingParty
    let user = try! UserEntity(id: Array("user-1".utf8), name: "alice")
    let authenticator: SoftwareAuthenticator
    let challenge = SecureRandom.bytes(32)
    static let origin = "https://example.com"

    init(
        policy: VerificationPolicy = VerificationPolicy(), profile: SoftwareAuthenticator.Profile = .platformPasskey,
        origins: [String] = [Harness.origin]
    ) {
        rp = testRP(origins: origins, policy: policy)
        authenticator = SoftwareAuthenticator(profile: profile)
    }

    func registrationCeremony(
        algorithms: [COSEAlgorithm] = [], uv: UserVerificationRequirement = .preferred,
        conditional: Bool = false
    ) -> PendingCeremony {
        PendingCeremony(
            kind: .registration, challenge: challenge, user: user, algorithms: algorithms,
            userVerification: uv, conditionalCreate: conditional, expiresAt: .distantFuture)
    }

    func register(_ alg: COSEAlgorithm = .es256, attestation: SoftwareAuthenticator.Attestation = .none) throws -> RegistrationParts {
        try authenticator.register(
            rpId: rp.id, origin: Harness.origin, challenge: challenge, userHandle: user.id,
            algorithm: alg, attestation: attestation)
    }

    /// Verifies a registration; nil on success, else the error code.
    func verify(_ parts: RegistrationParts, ceremony: PendingCeremony? = nil) -> String? {
        errorCode { _ = try RegistrationVerifier.verify(parts.response, ceremony: ceremony ?? registrationCeremony(), relyingParty: rp) }
    }

    func registered(_ alg: COSEAlgorithm = .es256) throws -> CredentialRecord {
        try RegistrationVerifier.verify(register(alg).response, ceremony: registrationCeremony(algorithms: [alg]), relyingParty: rp).credential
    }

    func authenticationCeremony(userHandle: [UInt8]? = nil, allow: [[UInt8]] = [], uv: UserVerificationRequirement = .preferred) -> PendingCeremony {
        PendingCeremony(
            kind: .authentication, challenge: challenge, userHandle: userHandle, allowCredentials: allow,
            userVerification: uv, expiresAt: .distantFuture)
    }

    func assert(_ credential: CredentialRecord) throws -> AssertionParts {
        try authenticator.authenticate(rpId: rp.id, origin: Harness.origin, challenge: challenge, credentialId: credential.id)
    }

    func verify(_ parts: AssertionParts, credential: CredentialRecord, ceremony: PendingCeremony? = nil) -> String? {
        errorCode {
            _ = try AuthenticationVerifier.verify(
                parts.response, ceremony: ceremony ?? authenticationCeremony(userHandle: user.id),
                credential: credential, relyingParty: rp)
        }
    }
}

/// The packed test certificates of TestVectors/generated/packed (made by its make.sh).
enum PackedCertificates {
    static let aaguid = AAGUID("00112233-4455-6677-8899-aabbccddeeff")!

    static func der(_ name: String) -> [UInt8] {
        let pem = String(
            decoding: FileManager.default.contents(atPath: Vectors.root.appendingPathComponent("generated/packed/\(name).pem").path)!, as: UTF8.self)
        return try! X509Certificate(pem: pem).der
    }

    static let signer: AttestationSigner = {
        let pem = String(
            decoding: FileManager.default.contents(atPath: Vectors.root.appendingPathComponent("generated/packed/attestation.pk8.pem").path)!, as: UTF8.self)
        return try! AttestationSigner(pem: pem)
    }()
}

/// Encodings of `bytes` that decode to them but are not their base64url (WebAuthn's: the URL
/// alphabet, no padding, zero spare bits): padded, with spare bits set, in the standard alphabet.
func otherEncodings(of bytes: [UInt8]) -> [String] {
    let canonical = Base64URL.encode(bytes)
    var others: [String] = []
    if canonical.count % 4 != 0 { others.append(canonical + String(repeating: "=", count: 4 - canonical.count % 4)) }
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    if canonical.count % 4 != 0, let last = canonical.last, let index = alphabet.firstIndex(of: last) {
        // The last character carries spare bits when the length is not a multiple of 4: set the lowest.
        others.append(String(canonical.dropLast()) + String(alphabet[index | 1]))
    }
    // The standard alphabet, where the text has a character the two alphabets spell apart.
    let standard = canonical.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    others.append(standard)
    return others.filter { $0 != canonical }
}
