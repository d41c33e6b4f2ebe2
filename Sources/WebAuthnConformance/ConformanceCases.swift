internal import Foundation
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

typealias JSONEdit = @Sendable (inout JSONObject) -> Void

/// The cases: ids and P-/F- numbers of the FIDO Alliance's server test list,
/// plus cases for what the server API, WebAuthn L3 and FIDO metadata add
/// (prefixes API-, L3-<section>-<step>, MDS3-). Where the list contradicts L3,
/// the runner follows L3 (Docs/Conformance.md says where). Every case states
/// its intent. The groups are in ConformanceCases+Options, +Attestation and +Assertion.
enum ConformanceCases {
    /// `offered`: the algorithms the server lists in pubKeyCredParams (OPTIONAL algorithm cases run only for those).
    static func all(_ r: ConformanceRunner, offered: Set<Int> = []) -> [ConformanceCase] {
        let list = CaseList(r, offered: offered)
        list.creationOptionsCases()
        list.attestationCases()
        list.getOptionsCases()
        list.assertionCases()
        return list.cases
    }
}

/// Collects cases while the groups add them.
final class CaseList {
    static let creation = "Server-ServerPublicKeyCredentialCreationOptions-Req-1"
    static let att = "Server-ServerAuthenticatorAttestationResponse"
    static let get = "Server-ServerPublicKeyCredentialGetOptionsResponse-Req-1"
    static let asr = "Server-ServerAuthenticatorAssertionResponse"

    let r: ConformanceRunner
    let authority: AttestationAuthority
    let offered: Set<Int>
    private(set) var cases: [ConformanceCase] = []

    init(_ r: ConformanceRunner, offered: Set<Int>) {
        self.r = r
        self.offered = offered
        authority = r.pki.authority
    }

    func add(_ id: String, _ intent: String, _ run: @escaping @Sendable () async throws -> Void) {
        cases.append(ConformanceCase(id: id, intent: intent, run: run))
    }

    /// A registration case: a security key registers (after `edit` and `json`); it must succeed or fail properly.
    /// The authenticator has `aaguid`; by default packed self attestation comes from the runner's
    /// self-attestation authenticator (its metadata says so), the rest from its security key.
    func registration(
        _ id: String, _ intent: String, passes: Bool, algorithm: COSEAlgorithm = .es256,
        attestation a: SoftwareAuthenticator.Attestation = .none, defect: SoftwareAuthenticator.StatementDefect? = nil,
        options: JSONObject = [:], aaguid: AAGUID? = nil, credentialIdLength: Int = 32,
        edit: @escaping @Sendable (inout RegistrationParts) throws -> Void = { _ in }, json: @escaping JSONEdit = { _ in }
    ) {
        let selfAttesting = if case .packedSelf = a { true } else { false }
        add(id, intent) { [r] in
            let authenticator = r.securityKey(aaguid: aaguid ?? (selfAttesting ? ConformancePKI.selfAAGUID : ConformancePKI.aaguid))
            let (reply, _) = try await r.register(
                r.client(), username: r.uniqueName("u"), authenticator: authenticator, algorithm: algorithm,
                attestation: a, options: options, defect: defect, credentialIdLength: credentialIdLength,
                edit: edit, json: json)
            try reply.expect(passes: passes)
        }
    }

    /// An assertion case: a registered credential signs in (after `edit` and `json`); it must succeed or fail properly.
    func assertion(
        _ id: String, _ intent: String, passes: Bool, key: (@Sendable () -> SoftwareAuthenticator)? = nil, userVerification: String? = nil,
        resign: Bool = true, edit: @escaping @Sendable (inout AssertionParts) throws -> Void = { _ in }, json: @escaping JSONEdit = { _ in }
    ) {
        add(id, intent) { [r] in
            let (c, name, authenticator, credential) = try await r.registered(key?())
            let (reply, _) = try await r.signIn(
                c, username: name, authenticator: authenticator, credential: credential, resign: resign,
                userVerification: userVerification, edit: edit, json: json)
            try reply.expect(passes: passes)
        }
    }
}

/// JSON and clientData edits of the posted credential.
enum Edits {
    static func without(_ key: String) -> JSONEdit { { $0[key] = nil } }
    static func setting(_ key: String, _ value: JSONValue) -> JSONEdit { { $0[key] = value } }
    static func inResponse(_ edit: @escaping JSONEdit) -> JSONEdit {
        { object in
            guard var response = object["response"]?.objectValue else { return }
            edit(&response)
            object["response"] = .object(response)
        }
    }
    /// clientDataJSON without one member, or with a member replaced.
    @Sendable static func clientData(_ c: ClientDataParts, removing key: String? = nil, setting pair: (String, JSONValue)? = nil) -> [UInt8] {
        var object = try! JSONValue.parse(c.bytes).objectValue!
        if let key { object[key] = nil }
        if let pair { object[pair.0] = pair.1 }
        return JSONValue.object(object).serializedBytes()
    }
}

extension ConformanceRunner.Reply {
    /// A P case must succeed; an F case must fail with status failed, a 4xx code and an errorMessage.
    func expect(passes: Bool) throws {
        if passes { try check(ok, message) } else { try check(failedProperly, "expected a failure: \(status) \(message)") }
    }
}

extension ConformanceRunner {
    /// A registered credential and a client that holds its session.
    func registered(_ key: SoftwareAuthenticator? = nil) async throws -> (ConformanceRunner.Client, String, SoftwareAuthenticator, [UInt8]) {
        let c = client(), name = uniqueName("user"), authenticator = key ?? securityKey()
        let (reply, parts) = try await register(c, username: name, authenticator: authenticator)
        try check(reply.ok, "registration: \(reply.message)")
        return (c, name, authenticator, parts.id)
    }
}
