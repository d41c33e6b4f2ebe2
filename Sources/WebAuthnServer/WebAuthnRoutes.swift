import Foundation
import Hummingbird
import Logging
import WebAuthnCore

/// The relying party's HTTP routes, to mount on a Hummingbird router:
///
/// - the FIDO2 server conformance API: `POST /attestation/options`,
///   `/attestation/result`, `/assertion/options`, `/assertion/result`;
/// - the demo page at `/` and its API under `/demo/`;
/// - `/.well-known/webauthn` and `/.well-known/apple-app-site-association` when configured.
///
/// Ceremony state is bound to the browser by an HttpOnly, SameSite cookie
/// and kept in the engine's challenge store, so it is consumed once even
/// when another instance receives the response.
public struct WebAuthnRoutes: Sendable {
    public let engine: WebAuthnEngine
    public let accounts: any AccountStore
    public let configuration: ServerConfiguration
    let sessions = SessionStore()

    public init(engine: WebAuthnEngine, accounts: any AccountStore, configuration: ServerConfiguration = ServerConfiguration()) {
        self.engine = engine
        self.accounts = accounts
        self.configuration = configuration
    }

    /// Adds the routes to `router`.
    public func add<Context: RequestContext>(to router: Router<Context>) {
        router.add(middleware: RequestLogMiddleware<Context>())
        router.post("/attestation/options") { request, context in await handle(request) { try await attestationOptions(request) } }
        router.post("/attestation/result") { request, context in await handle(request) { try await attestationResult(request) } }
        router.post("/assertion/options") { request, context in await handle(request) { try await assertionOptions(request) } }
        router.post("/assertion/result") { request, context in await handle(request) { try await assertionResult(request) } }
        if !configuration.relatedOrigins.isEmpty {
            router.get("/.well-known/webauthn") { _, _ in HTTP.json(["origins": .array(configuration.relatedOrigins.map { .string($0) })]) }
        }
        if !configuration.appleWebCredentialApps.isEmpty {
            router.get("/.well-known/apple-app-site-association") { _, _ in
                HTTP.json(["webcredentials": ["apps": .array(configuration.appleWebCredentialApps.map { .string($0) })]])
            }
        }
        if configuration.demo { addDemo(to: router) }
    }

    /// Runs a handler, turning every error into the conformance API's failure envelope.
    func handle(_ request: Request, _ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as WebAuthnError {
            return HTTP.failed(error, status: HTTP.status(for: error))
        } catch {
            return HTTP.failed(WebAuthnError(.storageFailure, "internal error"), status: .internalServerError)
        }
    }

    func sessionID(_ request: Request) -> String? { request.cookies[SessionStore.cookieName]?.value }

    // MARK: Registration

    func attestationOptions(_ request: Request) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        guard let username = body["username"]?.stringValue, !username.isEmpty, username.utf8.count <= 256 else {
            throw WebAuthnError(.responseMalformed, "username is missing, empty or longer than 256 bytes")
        }
        let displayName = body["displayName"]?.stringValue ?? username
        let user = try await accounts.account(named: username, creating: try UserEntity(id: SecureRandom.bytes(32), name: username, displayName: displayName))
        var selection = AuthenticatorSelection(userVerification: engine.relyingParty.policy.userVerification)
        var requested: JSONObject?
        if let asked = body["authenticatorSelection"]?.objectValue {
            (selection, requested) = AuthenticatorSelection.requested(asked, over: selection)
        }
        let attestation = body["attestation"]?.stringValue ?? "none"
        guard ["none", "indirect", "direct", "enterprise"].contains(attestation) else {
            throw WebAuthnError(.responseMalformed, "attestation \"\(attestation.prefix(32))\" is not none, indirect, direct or enterprise")
        }
        let extensions = body["extensions"]?.objectValue ?? JSONObject()
        let options = try await engine.startRegistration(user: user, authenticatorSelection: selection, attestation: attestation, extensions: extensions)
        let session = sessions.update(sessionID(request)) { $0.pendingChallenge = options.challenge }
        var payload = options.json.objectValue!
        if let requested {
            // The conformance API echoes the selection asked for; the ceremony uses its L3 effective values.
            payload["authenticatorSelection"] = .object(requested)
        }
        return HTTP.ok(payload, cookie: HTTP.sessionCookie(session, secure: configuration.secureCookies))
    }

    func attestationResult(_ request: Request) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        let session = sessionID(request)
        let result = try await engine.finishRegistration(RegistrationResponse(json: body), expectedChallenge: sessions.takeChallenge(session))
        let id = sessions.update(session) { $0.signedIn = result.credential.userHandle }
        return HTTP.ok([
            "credentialId": .string(Base64URL.encode(result.credential.id)),
            "fmt": .string(result.format),
            "attestationType": .string(result.attestationType.rawValue),
            "trusted": .bool(result.trust.trusted),
        ], cookie: HTTP.sessionCookie(id, secure: configuration.secureCookies))
    }

    // MARK: Authentication

    func assertionOptions(_ request: Request) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        var userHandle: [UInt8]?
        if let username = body["username"]?.stringValue, !username.isEmpty {
            guard let account = try await accounts.account(named: username) else {
                throw WebAuthnError(.credentialUnknown, "no account named \(username.prefix(64))")
            }
            guard !(try await engine.credentials.credentials(forUser: account.id)).isEmpty else {
                throw WebAuthnError(.credentialUnknown, "the account \(username.prefix(64)) has no credential")
            }
            userHandle = account.id
        }
        let uv = body["userVerification"]?.stringValue.flatMap(UserVerificationRequirement.init(rawValue:))
        let extensions = body["extensions"]?.objectValue ?? JSONObject()
        let conditional = body["mediation"]?.stringValue == "conditional"
        let options = try await engine.startAuthentication(userHandle: userHandle, userVerification: uv, extensions: extensions,
                                                           conditionalMediation: conditional)
        let session = sessions.update(sessionID(request)) { $0.pendingChallenge = options.challenge }
        return HTTP.ok(options.json.objectValue!, cookie: HTTP.sessionCookie(session, secure: configuration.secureCookies))
    }

    func assertionResult(_ request: Request) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        let session = sessionID(request)
        let result = try await engine.finishAuthentication(AuthenticationResponse(json: body), expectedChallenge: sessions.takeChallenge(session))
        let id = sessions.update(session) { $0.signedIn = result.userHandle }
        return HTTP.ok([
            "credentialId": .string(Base64URL.encode(result.credentialId)),
            "signCount": .number(Double(result.signCount)),
            "userVerified": .bool(result.userVerified),
        ], cookie: HTTP.sessionCookie(id, secure: configuration.secureCookies))
    }
}

/// Logs one line per request (Hummingbird tags it with `hb.request.id`);
/// never bodies, challenges or cookies.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = DispatchTime.now().uptimeNanoseconds
        let response = try await next(request, context)
        let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        context.logger.info("\(request.method) \(request.uri.path) \(response.status.code) \(String(format: "%.1f", ms)) ms")
        return response
    }
}
