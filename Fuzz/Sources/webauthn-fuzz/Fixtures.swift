import Dispatch
import Foundation
@testable import WebAuthnCore
@testable import _WebAuthnEncoding
@testable import _WebAuthnCrypto
@testable import WebAuthnMetadata
@testable import WebAuthnTesting

/// What every target shares: a fixed relying party (RP ID example.com), a
/// fixed clock, a fixed challenge, and a test PKI whose keys are files in
/// Fuzz/Keys (so seeds written by one process verify in another).
enum Fixtures {
    /// The repository root (this file is Fuzz/Sources/webauthn-fuzz/Fixtures.swift).
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static var keysFolder: URL { repository.appendingPathComponent("Fuzz/Keys") }

    static let rpId = "example.com"
    static let origin = "https://example.com"
    /// 2030-01-01: inside the validity of the test certificates (2024–2100).
    static let now = Date(timeIntervalSince1970: 1_893_456_000)
    /// The challenge of every pending ceremony the targets create.
    static let challenge: [UInt8] = Array(0..<32).map { UInt8($0 &* 7 &+ 1) }
    static let userHandle: [UInt8] = Array("fuzz-user".utf8)

    // MARK: Keys (Fuzz/Keys, written by --write-seeds when missing)

    static func keyFile(_ name: String) -> String {
        let url = keysFolder.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            fatalError("missing \(url.path): run `make fuzz-seeds` (webauthn-fuzz --write-seeds) once")
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func key(_ name: String, _ alg: COSEAlgorithm) -> SigningKey {
        do { return try SigningKey(pem: keyFile(name), algorithm: alg) } catch { fatalError("\(name): \(error)") }
    }

    /// The test authority: root, attestation key (packed, fido-u2f, TPM AIK).
    static let authority: AttestationAuthority = {
        do {
            let root = try X509Certificate(pem: keyFile("authority-root.pem"))
            return try AttestationAuthority(
                rootKeyPEM: keyFile("authority-root-key.pem"), rootCertificateDER: root.der,
                attestationKeyPEM: keyFile("authority-attestation-key.pem"))
        } catch { fatalError("the fuzz authority: \(error)") }
    }()

    /// The RSA key that signs SafetyNet JWSs and metadata BLOBs.
    static let jwsSigner = key("jws-signer-key.pem", .rs256)

    /// A SafetyNet signing certificate (CN attest.android.com) under the authority's root.
    static let safetyNetCertificate: X509Certificate = {
        do {
            return try authority.issue(CertificateBuilder(subject: [("C", "AA"), ("O", "WebAuthn Fuzzing"), ("CN", "attest.android.com")]), for: jwsSigner)
        } catch { fatalError("the SafetyNet certificate: \(error)") }
    }()

    /// A metadata BLOB signing certificate under the authority's root.
    static let blobCertificate: X509Certificate = {
        do {
            return try authority.issue(CertificateBuilder(subject: [("C", "AA"), ("O", "WebAuthn Fuzzing"), ("CN", "Metadata BLOB Signer")]), for: jwsSigner)
        } catch { fatalError("the BLOB certificate: \(error)") }
    }()

    /// Credential keys the authentication targets' stored credentials hold.
    static let credentialKeys: [(id: [UInt8], key: SigningKey)] = [
        (Array("fuzz-credential-es256".utf8), key("credential-es256-key.pem", .es256)),
        (Array("fuzz-credential-rs256".utf8), key("credential-rs256-key.pem", .rs256)),
        (Array("fuzz-credential-eddsa".utf8), key("credential-ed25519-key.pem", .edDSA)),
    ]

    /// Writes the key files that are missing (the fuzz PKI is made once and committed).
    static func writeMissingKeys() throws {
        try FileManager.default.createDirectory(at: keysFolder, withIntermediateDirectories: true)
        func write(_ name: String, _ text: () throws -> String) throws {
            let url = keysFolder.appendingPathComponent(name)
            guard !FileManager.default.fileExists(atPath: url.path) else { return }
            try Data(text().utf8).write(to: url)
            print("wrote \(url.path)")
        }
        let rootKey =
            FileManager.default.fileExists(atPath: keysFolder.appendingPathComponent("authority-root-key.pem").path)
            ? key("authority-root-key.pem", .es256) : try SigningKey.generate(.es256)
        try write("authority-root-key.pem") { try rootKey.privateKeyPEM() }
        try write("authority-root.pem") {
            try CertificateBuilder.certificateAuthority(organization: "WebAuthn Fuzzing", name: "WebAuthn Fuzzing Root")
                .build(key: rootKey, issuer: nil, issuerKey: rootKey).pem
        }
        try write("authority-attestation-key.pem") { try SigningKey.generate(.es256).privateKeyPEM() }
        try write("jws-signer-key.pem") { try SigningKey.generate(.rs256).privateKeyPEM() }
        try write("credential-es256-key.pem") { try SigningKey.generate(.es256).privateKeyPEM() }
        try write("credential-rs256-key.pem") { try SigningKey.generate(.rs256).privateKeyPEM() }
        try write("credential-ed25519-key.pem") { try SigningKey.generate(.edDSA).privateKeyPEM() }
    }

    // MARK: The relying party

    /// Every algorithm, SafetyNet timestamps accepted for a century (the
    /// generated seeds carry the time they were made), the built-in roots
    /// plus the fuzz authority's root for every format.
    static let relyingParty: RelyingParty = {
        var anchors = TrustAnchors.builtIn
        for format: AttestationFormat in [.packed, .fidoU2F, .tpm, .androidKey, .androidSafetyNet, .apple] {
            anchors.formatRoots[format, default: []].append(authority.root)
        }
        let policy = VerificationPolicy(
            algorithms: COSEAlgorithm.supported,
            attestation: AttestationPolicy(safetyNetMaxAge: 100 * 365 * 86_400))
        do {
            return try RelyingParty(id: rpId, name: "Fuzz", origins: [origin], policy: policy, clock: .fixed(now), trustAnchors: anchors)
        } catch { fatalError("the fuzz relying party: \(error)") }
    }()

    static var policy: VerificationPolicy { relyingParty.policy }

    /// clientDataJSON of a registration for the fixed challenge and origin.
    static let createClientData = ClientDataParts(type: "webauthn.create", challenge: challenge, origin: origin)
    /// clientDataJSON of an authentication for the fixed challenge and origin.
    static let getClientData = ClientDataParts(type: "webauthn.get", challenge: challenge, origin: origin)
    static let createClientDataHash = Digest.sha256(createClientData.bytes)

    static let user: UserEntity = {
        do { return try UserEntity(id: userHandle, name: "fuzz@example.com") } catch { fatalError("\(error)") }
    }()

    /// The stored credentials the authentication targets sign in to.
    static let credentials: [CredentialRecord] = credentialKeys.map { entry in
        do {
            let cose = try COSEKey(bytes: CBOREncoder.encode(try entry.key.coseKey()))
            return CredentialRecord(
                id: entry.id, userHandle: userHandle, publicKey: cose, signCount: 7, transports: ["usb"],
                uvInitialized: false, backupEligible: false, backupState: false, createdAt: now)
        } catch { fatalError("a fuzz credential: \(error)") }
    }

    /// A fresh engine with in-memory stores holding the fixed credentials and
    /// one pending ceremony of `kind` for the fixed challenge.
    static func engine(pending kind: PendingCeremony.Kind) -> WebAuthnEngine {
        let rp = relyingParty
        let engine = WebAuthnEngine(relyingParty: rp)
        let ceremony: PendingCeremony
        switch kind {
        case .registration:
            ceremony = PendingCeremony(
                kind: .registration, challenge: challenge, user: user, algorithms: rp.policy.algorithms,
                userVerification: .preferred, expiresAt: now.addingTimeInterval(300))
        case .authentication, .appleNonce, .appleState, .appleNotification:
            // A discoverable login: the response must name its user. (The fuzz targets ask for
            // WebAuthn ceremonies only; single-use values are not ceremonies a response finishes.)
            ceremony = PendingCeremony(
                kind: .authentication, challenge: challenge, userVerification: .preferred,
                expiresAt: now.addingTimeInterval(300))
        }
        blocking {
            for record in credentials { try await engine.credentials.insert(record) }
            try await engine.challenges.insert(ceremony)
        }
        return engine
    }

    /// Builds everything once, before the first input (so no input pays for it).
    static func warmUp() {
        _ = relyingParty
        _ = credentials
        _ = safetyNetCertificate
        _ = blobCertificate
        _ = safetyNetJWSHeader
        _ = safetyNetAuthenticatorData
        _ = crlFixtures
        _ = createClientDataHash
    }
}

/// Runs async work to completion from the fuzzer's synchronous callback.
final class ResultBox: @unchecked Sendable {
    var error: (any Error)?
}

@discardableResult
func blocking(_ body: @escaping @Sendable () async throws -> Void) -> (any Error)? {
    let box = ResultBox()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { try await body() } catch { box.error = error }
        done.signal()
    }
    done.wait()
    return box.error
}
