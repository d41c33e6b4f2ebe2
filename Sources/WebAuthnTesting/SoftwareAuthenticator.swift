internal import Foundation
public import WebAuthnCore
import Synchronization
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// An attestation private key (for packed full attestation in tests).
public struct AttestationSigner: Sendable {
    let key: SigningKey
    /// Loads a PEM private key that signs with `algorithm`.
    public init(pem: String, algorithm: COSEAlgorithm = .es256) throws {
        key = try SigningKey(pem: pem, algorithm: algorithm)
    }
    package init(key: SigningKey) { self.key = key }
}

extension CBOR {
    /// A map with the value of text key `key` replaced (other members and their order kept).
    package func replacing(_ key: String, with value: CBOR) -> CBOR {
        guard case .map(let pairs) = self else { return self }
        return .map(pairs.map { $0.key == .text(key) ? CBORPair($0.key, value) : $0 })
    }

    /// A map without text key `key`.
    package func removing(_ key: String) -> CBOR {
        guard case .map(let pairs) = self else { return self }
        return .map(pairs.filter { $0.key != .text(key) })
    }
}

extension SoftwareAuthenticator.Attestation {
    /// Re-signs a packed statement after its parts changed.
    public static func resignPacked(_ parts: inout RegistrationParts, signer: AttestationSigner) throws {
        parts.statement = parts.statement.replacing(
            "sig", with: .bytes(try signer.key.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))))
    }
}

/// A software authenticator that produces real, signed WebAuthn responses,
/// for tests of relying parties (this engine's or your own).
///
/// It creates credentials with `none` or `packed` self attestation and signs
/// assertions. Every part of a response is a plain value you can change
/// before encoding it, to produce each kind of defect on purpose.
public final class SoftwareAuthenticator: Sendable {
    /// How the authenticator behaves.
    public struct Profile: Sendable {
        /// Whether responses carry UV (user verified).
        public var userVerified: Bool
        /// Whether responses carry BE (backup eligible).
        public var backupEligible: Bool
        /// Whether responses carry BS (backed up).
        public var backedUp: Bool
        /// Counter step per signature; 0 keeps the counter at zero (synced passkeys).
        public var counterStep: UInt32
        /// The AAGUID of attested credential data (16 bytes; all zero: not disclosed).
        public var aaguid: [UInt8]
        /// The `authenticatorAttachment` responses report.
        public var attachment: AuthenticatorAttachment
        /// The transports registration responses report.
        public var transports: [AuthenticatorTransport]

        /// A profile; each parameter sets the property of the same name.
        public init(
            userVerified: Bool, backupEligible: Bool, backedUp: Bool, counterStep: UInt32, aaguid: [UInt8],
            attachment: AuthenticatorAttachment, transports: [AuthenticatorTransport]
        ) {
            self.userVerified = userVerified
            self.backupEligible = backupEligible
            self.backedUp = backedUp
            self.counterStep = counterStep
            self.aaguid = aaguid
            self.attachment = attachment
            self.transports = transports
        }

        /// A synced platform passkey: UV, BE and BS set, counter always 0.
        public static let platformPasskey = Profile(
            userVerified: true, backupEligible: true, backedUp: true, counterStep: 0,
            aaguid: [UInt8](repeating: 0, count: 16), attachment: .platform, transports: [.internal, .hybrid])
        /// A roaming security key: UP only, rising counter, not backup eligible.
        public static let securityKey = Profile(
            userVerified: false, backupEligible: false, backedUp: false, counterStep: 1,
            aaguid: [0xee, 0x88, 0x28, 0x79, 0x72, 0x1c, 0x49, 0x13, 0x97, 0x75, 0x3d, 0xfc, 0xce, 0x97, 0x07, 0x2a],
            attachment: .crossPlatform, transports: [.usb, .nfc])
    }

    /// Attestation the authenticator produces.
    public enum Attestation: Sendable {
        /// No attestation statement (format `none`).
        case none
        /// Packed self attestation: the credential key signs.
        case packedSelf
        /// Packed full attestation: `signer` signs, `x5c` (DER, leaf first) is sent.
        case packed(x5c: [[UInt8]], signer: AttestationSigner)
        /// Packed full attestation under `authority` (its attestation key and a certificate with the AAGUID).
        case packedFull(AttestationAuthority)
        /// fido-u2f (AAGUID all zero, ES256 credential).
        case fidoU2F(AttestationAuthority)
        /// apple anonymous attestation.
        case apple(AttestationAuthority)
        /// android-key, with a KeyDescription that binds the clientDataHash.
        case androidKey(AttestationAuthority)
        /// tpm 2.0 with an ECC (ES256 credential) or RSA (RS256) pubArea and an AIK certificate.
        case tpm(AttestationAuthority)
        /// tpm 2.0 as many Windows Hello TPMs make it: an RSA AIK signs certInfo with
        /// RS1, and extraData is the SHA-1 of attToBeSigned.
        case tpmSHA1(AttestationAuthority)
        /// android-safetynet: a JWS by a certificate issued to attest.android.com
        /// under `authority` (Google's service cannot be called from a test).
        case androidSafetyNet(AttestationAuthority)

        var format: AttestationFormat {
            switch self {
            case .none: return .none
            case .packedSelf, .packed, .packedFull: return .packed
            case .fidoU2F: return .fidoU2F
            case .apple: return .apple
            case .androidKey: return .androidKey
            case .androidSafetyNet: return .androidSafetyNet
            case .tpm, .tpmSHA1: return .tpm
            }
        }
    }

    struct Credential {
        let key: SigningKey
        let userHandle: [UInt8]
        var counter: UInt32
    }

    /// How the authenticator behaves.
    public let profile: Profile
    private let credentials = Mutex<[[UInt8]: Credential]>([:])

    /// An authenticator with no credentials yet. Default profile: ``Profile/platformPasskey``.
    public init(profile: Profile = .platformPasskey) { self.profile = profile }

    /// `authenticatorMakeCredential` plus the client's part: returns the
    /// registration response for `options`.
    public func register(
        rpId: String, origin: String, challenge: [UInt8], userHandle: [UInt8],
        algorithm: COSEAlgorithm = .es256, attestation: Attestation = .none, credentialIdLength: Int = 32
    ) throws -> RegistrationParts {
        let key = try SigningKey.generate(algorithm)
        let id = SecureRandom.bytes(credentialIdLength)
        let clientData = ClientDataParts(type: "webauthn.create", challenge: challenge, origin: origin)
        var parts = RegistrationParts(
            id: id, clientData: clientData,
            authenticatorData: AuthenticatorDataParts(
                rpId: rpId, flags: flags(attested: true), signCount: 0,
                attested: .init(aaguid: profile.aaguid, credentialId: id, publicKey: try key.coseKey())),
            format: attestation.format, statement: .map([]),
            transports: profile.transports, attachment: profile.attachment)
        switch attestation {
        case .none:
            break
        case .packedSelf:
            parts.statement = .map([
                CBORPair(.text("alg"), CBOR(algorithm.rawValue)),
                CBORPair(.text("sig"), .bytes(try key.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON)))),
            ])
        case .packedFull(let authority):
            parts.statement = .map([
                CBORPair(.text("alg"), CBOR(COSEAlgorithm.es256.rawValue)),
                CBORPair(.text("sig"), .bytes(try authority.attestationKey.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON)))),
                CBORPair(.text("x5c"), .array([.bytes(try authority.packedCertificate(aaguid: profile.aaguid).der)])),
            ])
        case .fidoU2F(let authority):
            parts.authenticatorData.attested?.aaguid = [UInt8](repeating: 0, count: 16)
            parts.statement = try FormatStatements.fidoU2F(parts, authority: authority)
        case .apple(let authority):
            parts.statement = try FormatStatements.apple(parts, credentialKey: key, authority: authority)
        case .androidKey(let authority):
            parts.statement = try FormatStatements.androidKey(parts, credentialKey: key, authority: authority)
        case .tpm(let authority):
            parts.statement = try FormatStatements.tpm(parts, authority: authority)
        case .tpmSHA1(let authority):
            parts.statement = try FormatStatements.tpm(parts, authority: authority, sha1: true)
        case .androidSafetyNet(let authority):
            parts.statement = try FormatStatements.safetyNet(parts, authority: authority)
        case .packed(let x5c, let signer):
            let attestationKey = signer.key
            parts.statement = .map([
                CBORPair(.text("alg"), CBOR(attestationKey.algorithm.rawValue)),
                CBORPair(.text("sig"), .bytes(try attestationKey.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON)))),
                CBORPair(.text("x5c"), .array(x5c.map { .bytes($0) })),
            ])
        }
        credentials.withLock { $0[id] = Credential(key: key, userHandle: userHandle, counter: 0) }
        return parts
    }

    /// A defect to build into a statement on purpose.
    public enum StatementDefect: Sendable {
        /// apple, android-safetynet: a nonce that is not SHA-256(authData ‖ clientDataHash).
        case wrongNonce
        /// android-safetynet: a timestampMs two minutes old (the engine's default window is one minute).
        case staleTimestamp
        /// android-safetynet: a timestampMs two minutes in the future.
        case futureTimestamp
        /// android-safetynet: an empty `ver`.
        case emptyVersion
        /// android-safetynet: an empty `response` (no JWS).
        case emptyResponse
        /// android-safetynet: a JWS header whose x5c is an empty array.
        case emptyCertificateChain
        /// android-safetynet: ctsProfileMatch false.
        case ctsProfileMismatch
        /// android-safetynet: a signing certificate issued to a host other than attest.android.com.
        case wrongHost
        /// android-key: an attestationChallenge that is not the clientDataHash.
        case wrongChallenge
        /// android-key: allApplications in the TEE-enforced list.
        case allApplications
        /// android-key: a certificate (and signature) for a key other than the credential key.
        case foreignCertificateKey
        /// packed full: the credential key, not the attestation key, signs.
        case signedByCredentialKey
        /// tpm: certInfo.extraData that is not the hash of authData ‖ clientDataHash.
        case wrongExtraData
        /// tpm: an AIK certificate without the tcg-kp-AIKCertificate EKU.
        case aikWithoutEKU
    }

    /// Re-makes the attestation statement of `parts` (after its parts were
    /// changed), with `defect` built in.
    public func restate(_ parts: inout RegistrationParts, _ attestation: Attestation, defect: StatementDefect? = nil) throws {
        guard let key = credentials.withLock({ $0[parts.id]?.key }) else {
            throw WebAuthnError(.credentialUnknown, "the authenticator holds no credential \(Base64URL.encode(parts.id))")
        }
        switch attestation {
        case .fidoU2F(let authority): parts.statement = try FormatStatements.fidoU2F(parts, authority: authority)
        case .apple(let authority):
            parts.statement = try FormatStatements.apple(
                parts, credentialKey: key, authority: authority,
                nonce: defect == .wrongNonce ? SecureRandom.bytes(32) : nil)
        case .androidKey(let authority):
            parts.statement = try FormatStatements.androidKey(
                parts, credentialKey: key, authority: authority,
                challenge: defect == .wrongChallenge ? SecureRandom.bytes(32) : nil,
                allApplications: defect == .allApplications,
                certificateKey: defect == .foreignCertificateKey ? SigningKey.generate(key.algorithm) : nil)
        case .tpm(let authority), .tpmSHA1(let authority):
            let sha1 = if case .tpmSHA1 = attestation { true } else { false }
            parts.statement = try FormatStatements.tpm(
                parts, authority: authority, extraData: defect == .wrongExtraData ? SecureRandom.bytes(sha1 ? 20 : 32) : nil,
                aikEKU: defect != .aikWithoutEKU, sha1: sha1)
        case .androidSafetyNet(let authority):
            let skew: TimeInterval = defect == .staleTimestamp ? -120 : defect == .futureTimestamp ? 120 : 0
            var statement = try FormatStatements.safetyNet(
                parts, authority: authority, nonce: defect == .wrongNonce ? SecureRandom.bytes(32) : nil,
                timestamp: Date(timeIntervalSinceNow: skew), ctsProfileMatch: defect != .ctsProfileMismatch,
                host: defect == .wrongHost ? "attest.example.com" : "attest.android.com",
                emptyChain: defect == .emptyCertificateChain)
            if defect == .emptyVersion { statement = statement.replacing("ver", with: .text("")) }
            if defect == .emptyResponse { statement = statement.replacing("response", with: .bytes([])) }
            parts.statement = statement
        case .packedFull where defect == .signedByCredentialKey, .packed where defect == .signedByCredentialKey:
            parts.statement = parts.statement.replacing("sig", with: .bytes(try key.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))))
        default:
            throw WebAuthnError(
                .configurationInvalid, "restate covers fido-u2f, apple, android-key, android-safetynet, tpm and packed full (signedByCredentialKey)")
        }
    }

    /// `authenticatorGetAssertion` plus the client's part: an assertion with
    /// the credential `id`, signed, counter advanced per the profile.
    public func authenticate(rpId: String, origin: String, challenge: [UInt8], credentialId id: [UInt8]) throws -> AssertionParts {
        let credential: Credential? = credentials.withLock { store in
            guard var c = store[id] else { return nil }
            c.counter += profile.counterStep
            store[id] = c
            return c
        }
        guard let credential else { throw WebAuthnError(.credentialUnknown, "the authenticator holds no credential \(Base64URL.encode(id))") }
        var parts = AssertionParts(
            id: id, clientData: ClientDataParts(type: "webauthn.get", challenge: challenge, origin: origin),
            authenticatorData: AuthenticatorDataParts(rpId: rpId, flags: flags(attested: false), signCount: credential.counter, attested: nil),
            signature: [], userHandle: credential.userHandle, attachment: profile.attachment)
        parts.signature = try sign(parts, with: credential.key)
        return parts
    }

    /// Re-signs an assertion after its parts were changed (to test checks
    /// that come after the signature, such as the counter).
    public func resign(_ parts: AssertionParts) throws -> AssertionParts {
        guard let key = credentials.withLock({ $0[parts.id]?.key }) else {
            throw WebAuthnError(.credentialUnknown, "the authenticator holds no credential \(Base64URL.encode(parts.id))")
        }
        var copy = parts
        copy.signature = try sign(parts, with: key)
        return copy
    }

    private func sign(_ parts: AssertionParts, with key: SigningKey) throws -> [UInt8] {
        try key.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))
    }

    private func flags(attested: Bool) -> AuthenticatorFlags {
        var f: AuthenticatorFlags = [.userPresent]
        if profile.userVerified { f.insert(.userVerified) }
        if profile.backupEligible { f.insert(.backupEligible) }
        if profile.backedUp { f.insert(.backupState) }
        if attested { f.insert(.attestedCredentialData) }
        return f
    }
}
