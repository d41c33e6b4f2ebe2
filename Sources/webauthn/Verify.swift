import ArgumentParser
import Foundation
import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify a registration or an authentication response.",
        subcommands: [VerifyRegistration.self, VerifyAuthentication.self]
    )
}

/// Options both verifications share.
struct CommonVerifyOptions: ParsableArguments {
    @Option(name: .customLong("rp-id"), parsing: .unconditional, help: "The RP ID, e.g. example.com.")
    var rpId: String

    @Option(name: .customLong("origin"), parsing: .unconditionalSingleValue, help: "An allowed origin (repeatable).")
    var origins: [String] = []

    @Option(parsing: .unconditional, help: "The challenge issued, base64url.")
    var challenge: String

    @Option(parsing: .unconditional, help: "The response JSON file (browser toJSON() or FIDO conformance shape); - for stdin.")
    var response: String

    @Option(parsing: .unconditional, help: "Verify as of this time, e.g. for expired certificates: a full RFC 3339 time, such as 2024-08-31T12:00:00Z.")
    var at: String?

    @Flag(name: .customLong("require-user-verification"), help: "Fail unless the UV flag is set.")
    var requireUserVerification = false

    @Flag(name: .customLong("allow-cross-origin"), help: "Accept crossOrigin: true from any top-level origin.")
    var allowCrossOrigin = false

    @Option(
        name: .customLong("top-origin"), parsing: .unconditionalSingleValue, help: "Accept cross-origin responses only from this top-level origin (repeatable)."
    )
    var topOrigins: [String] = []

    func validate() throws {
        guard !origins.isEmpty else { throw ValidationError("at least one --origin is required") }
        guard let bytes = Base64URL.decode(challenge), bytes.count >= 1 else {
            throw ValidationError("--challenge is not base64url")
        }
        if let at, Self.parseDate(at) == nil { throw ValidationError("--at is not a full RFC 3339 time (such as 2024-08-31T12:00:00Z): \(at)") }
    }

    /// An RFC 3339 time (`2025-01-01T00:00:00Z`, fractional seconds and an offset allowed), checked
    /// field by field before Foundation reads it: its parser took `2024-02-30`, `+99:99` and
    /// `24:00:00`, and a 12-digit year wrapped to millions of years BC (red team, sixteenth pass).
    /// A malformed response, with a hint when the file is of the other ceremony (it has the
    /// other's member) or a test vector's wrapper (the response under a member of it): an
    /// adopter's review found both refused with no clue.
    static func hinted(_ error: WebAuthnError, body: [UInt8], expected: String) -> WebAuthnError {
        guard error.code == .responseMalformed, let json = try? JSONValue.parse(body, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 32)) else {
            return error
        }
        let other = expected == "attestationObject" ? "authenticatorData" : "attestationObject"
        if json["response"]?[expected] == nil, json["response"]?[other] != nil {
            let command = other == "attestationObject" ? "verify registration" : "verify authentication"
            return WebAuthnError(error.code, error.message + " (this is the response of the other ceremony: use \(command))", step: error.step)
        }
        if json["type"] == nil, json["response"]?[expected] == nil, json["webauthn_json"] != nil || json["response"]?["response"] != nil {
            return WebAuthnError(error.code, error.message + " (this looks like a test vector's file: pass the response inside it)", step: error.step)
        }
        return error
    }

    static func parseDate(_ text: String) -> Date? {
        guard isRFC3339(Array(text.utf8)) else { return nil }
        let plain = ISO8601DateFormatter()
        if let d = plain.date(from: text) { return d }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` with every field in its range.
    static func isRFC3339(_ b: [UInt8]) -> Bool {
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= b.count else { return nil }
            var value = 0
            for byte in b[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard b.count >= 20, b.count <= 40, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), hour < 24, minute < 60, second < 60
        else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...days).contains(day) else { return false }
        var i = 19
        if b[i] == UInt8(ascii: ".") {
            i += 1
            let digits = b[i...].prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }.count
            guard digits > 0 else { return false }
            i += digits
        }
        guard i < b.count else { return false }
        if b[i] == UInt8(ascii: "Z") { return i + 1 == b.count }
        guard b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-"), b.count == i + 6, b[i + 3] == UInt8(ascii: ":"),
            let offsetHours = number((i + 1)..<(i + 3)), let offsetMinutes = number((i + 4)..<(i + 6))
        else { return false }
        return offsetHours < 24 && offsetMinutes < 60
    }

    var challengeBytes: [UInt8] { Base64URL.decode(challenge) ?? [] }

    var verificationTime: Date { at.flatMap(Self.parseDate) ?? Date() }

    func relyingParty(attestation: AttestationPolicy = AttestationPolicy(), trustAnchors: TrustAnchors = .builtIn) throws -> RelyingParty {
        let crossOrigin: CrossOriginPolicy = !topOrigins.isEmpty ? .allowTopOrigins(topOrigins) : allowCrossOrigin ? .allowAnyTopOrigin : .deny
        let policy = VerificationPolicy(
            userVerification: requireUserVerification ? .required : .preferred, crossOrigin: crossOrigin,
            algorithms: COSEAlgorithm.supported.filter { $0 != .rs1 }, attestation: attestation)
        let clock = at.flatMap(Self.parseDate).map(WebAuthnClock.fixed) ?? .system
        do {
            return try RelyingParty(id: rpId, origins: origins, policy: policy, clock: clock, trustAnchors: trustAnchors)
        } catch {
            throw ValidationError(error.message)
        }
    }
}

struct VerifyRegistration: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registration", abstract: "Verify a registration (attestation) response (WebAuthn L3 §7.1).")

    @OptionGroup var common: CommonVerifyOptions

    @OptionGroup var trust: MetadataOptions

    @Flag(name: .customLong("require-trusted-attestation"), help: "Fail when an attestation certificate chain is not trusted.")
    var requireTrustedAttestation = false

    @Option(
        name: .customLong("attestation-types"), parsing: .unconditional,
        help: "Accepted attestation types, comma-separated subset of none,self,basic,attca,anonca.")
    var attestationTypes: String?

    func validate() throws {
        _ = try acceptedTypes()
    }

    func acceptedTypes() throws -> Set<AttestationType> { try Self.parseTypes(attestationTypes) }

    static func parseTypes(_ attestationTypes: String?) throws -> Set<AttestationType> {
        guard let attestationTypes else { return Set(AttestationType.allCases) }
        var types: Set<AttestationType> = []
        for name in attestationTypes.split(separator: ",") {
            guard let t = AttestationType(rawValue: name.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("--attestation-types: unknown type \"\(name)\"; use none,self,basic,attca,anonca")
            }
            types.insert(t)
        }
        guard !types.isEmpty else { throw ValidationError("--attestation-types is empty") }
        return types
    }

    func run() async throws {
        let anchors = try trust.anchors(at: common.verificationTime) { path, error in
            Output.line("metadata BLOB \(path) rejected, not used: \(error.code.rawValue): \(error.message)")
        }
        let rp = try common.relyingParty(
            attestation: AttestationPolicy(acceptedTypes: try acceptedTypes(), requireTrustedAttestation: requireTrustedAttestation),
            trustAnchors: anchors)
        let body = try readInput(common.response)
        let output: JSONValue
        do {
            output = try Self.verify(body, rp: rp, challenge: common.challengeBytes)
        } catch {
            throw VerificationFailure(error: CommonVerifyOptions.hinted(error, body: body, expected: "attestationObject"))
        }
        Output.print(output)
    }

    static func verify(_ body: [UInt8], rp: RelyingParty, challenge: [UInt8]) throws(WebAuthnError) -> JSONValue {
        let response = try RegistrationResponse(json: body)
        // The CLI has no account: a placeholder owner, every algorithm the engine verifies. It
        // keeps no ceremony either: one that never expires at --at (Date.distantFuture, the year
        // 4001, made a later --at fail with challenge_expired: red team, thirty-first pass).
        let ceremony = PendingCeremony(
            kind: .registration, challenge: challenge, user: try UserEntity(id: [0], name: "cli"),
            algorithms: rp.policy.algorithms, userVerification: rp.policy.userVerification, expiresAt: rp.clock.now().addingTimeInterval(3600))
        let r = try RegistrationVerifier.verify(response, ceremony: ceremony, relyingParty: rp)
        var metadata = JSONValue.null
        if let entry = r.trust.metadata {
            metadata = [
                "description": .string(entry.description), "aaguid": entry.aaguid.map { .string($0.description) } ?? .null,
                "status": entry.status.map { .string($0.rawValue) } ?? .null,
            ]
        }
        return .object([
            "status": "ok",
            "fmt": .string(r.format.rawValue),
            "attestationType": .string(r.attestationType.rawValue),
            "trusted": .bool(r.trust.trusted),
            "trustReason": .string(r.trust.reason),
            "metadata": metadata,
            // A TPM AIK certificate's subject is empty by spec: its issuer says whose it is.
            "certificateChain": .array(
                r.trust.certificateChain.map { .string($0.subjectSummary.isEmpty ? "(empty subject; issuer \($0.issuerSummary))" : $0.subjectSummary) }),
            "aaguid": .string(r.credential.aaguid.description),
            "credentialId": .string(Base64URL.encode(r.credential.id)),
            "publicKey": .string(Base64URL.encode(r.credential.publicKey.bytes)),
            "alg": .number(Double(r.credential.publicKey.algorithm.rawValue)),
            "signCount": .number(Double(r.signCount)),
            "userVerified": .bool(r.userVerified),
            "backupEligible": .bool(r.backupEligible),
            "backedUp": .bool(r.backedUp),
            "riskSignals": riskList(r.riskSignals),
        ])
    }
}

func riskList(_ risks: Set<RiskSignal>) -> JSONValue {
    .array(risks.map(\.rawValue).sorted().map { .string($0) })
}

struct VerifyAuthentication: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authentication", abstract: "Verify an authentication (assertion) response (WebAuthn L3 §7.2).")

    @OptionGroup var common: CommonVerifyOptions

    @Option(name: .customLong("public-key"), parsing: .unconditional, help: "The credential public key (COSE_Key), base64url.")
    var publicKey: String

    @Option(name: .customLong("sign-count"), parsing: .unconditional, help: "The stored sign counter.")
    var signCount: UInt32 = 0

    func validate() throws {
        guard let bytes = Base64URL.decode(publicKey) else { throw ValidationError("--public-key is not base64url") }
        // A key that does not parse is the option's fault, not the response's (an adopter's
        // review: `--public-key AAAA` answered cbor_malformed, exit 1, as if the response failed).
        do { _ = try COSEKey(bytes: bytes) } catch { throw ValidationError("--public-key is not a COSE_Key: \(error.message)") }
    }

    func run() async throws {
        let rp = try common.relyingParty()
        let body = try readInput(common.response)
        let output: JSONValue
        do {
            output = try Self.verify(body, rp: rp, challenge: common.challengeBytes, publicKey: Base64URL.decode(publicKey) ?? [], signCount: signCount)
        } catch {
            throw VerificationFailure(error: CommonVerifyOptions.hinted(error, body: body, expected: "authenticatorData"))
        }
        Output.print(output)
    }

    static func verify(_ body: [UInt8], rp: RelyingParty, challenge: [UInt8], publicKey: [UInt8], signCount: UInt32) throws(WebAuthnError) -> JSONValue {
        let response = try AuthenticationResponse(json: body)
        let key = try COSEKey(bytes: publicKey)
        let authData = try AuthenticatorData(bytes: response.authenticatorData)
        // The CLI has no account store: the credential is the response's own,
        // owned by whatever userHandle it carries, with BE as it reports.
        let owner = response.userHandle ?? [0]
        let record = CredentialRecord(
            id: response.id, userHandle: owner, publicKey: key, signCount: signCount, uvInitialized: false,
            backupEligible: authData.backupEligible, backupState: authData.backedUp, createdAt: Date(timeIntervalSince1970: 0))
        let ceremony = PendingCeremony(
            kind: .authentication, challenge: challenge, userHandle: owner,
            userVerification: rp.policy.userVerification, expiresAt: rp.clock.now().addingTimeInterval(3600))
        let r = try AuthenticationVerifier.verify(response, ceremony: ceremony, credential: record, relyingParty: rp)
        return .object([
            "status": "ok",
            "signCount": .number(Double(r.signCount)),
            "userVerified": .bool(r.userVerified),
            "backedUp": .bool(r.backedUp),
            "riskSignals": riskList(r.riskSignals),
        ])
    }
}
