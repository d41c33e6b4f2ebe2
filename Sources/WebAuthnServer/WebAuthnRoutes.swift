internal import Foundation
public import Hummingbird
internal import Logging
public import NIOCore
public import WebAuthnCore
internal import WebAuthnMetadata
internal import CoreMetrics
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The relying party's HTTP routes, to mount on a Hummingbird router:
///
/// - the FIDO2 server conformance API: `POST /attestation/options`,
///   `/attestation/result`, `/assertion/options`, `/assertion/result`;
/// - the demo page at `/` and its API under `/demo/` (``ServerConfiguration/demo``);
/// - `/.well-known/webauthn` and `/.well-known/apple-app-site-association` when configured.
///
/// Safe by default (Docs/ThreatModel.md): accounts are created only by a
/// registration that completes, and an existing account takes a new
/// credential only from a session signed in as it; every ceremony is bound
/// to the browser session that asked for it and finished only with that
/// session's cookie, on `application/json`; unknown names get stand-in
/// options indistinguishable from real ones; failed sign-ins answer one
/// generic message; the endpoints are throttled per client address and per
/// session; internal errors reach the client as a request id only.
public struct WebAuthnRoutes: Sendable {
    /// The engine that runs the ceremonies, with its credential and challenge stores.
    public let engine: WebAuthnEngine
    /// Where accounts live; registrations of new names create them here.
    public let accounts: any AccountStore
    /// What the routes serve, and how (secret, throttling, proxies, enrollment hook, demo).
    public let configuration: ServerConfiguration
    let sessions: BrowserSessions
    let standIns: StandInCredentials
    let limiter: RateLimiter?
    /// The budgets of refusals' audit events per client address (``audit(_:_:_:_:)``) and of
    /// changes per account (``throttleChanges(_:_:_:)``); kept whether or not requests are throttled.
    let auditBudget = RateLimiter(maxTracked: 100_000)
    /// Deletions of one account's credentials, one at a time (``deleteCredential(_:of:)``).
    let credentialDeletions = KeyedSerializer<[UInt8]>()
    let metrics: RouteMetrics

    /// Routes over `engine` and its stores.
    ///
    /// - Parameters:
    ///   - engine: the engine that runs the ceremonies.
    ///   - accounts: where accounts live; registrations of new names create them here.
    ///   - sessions: where signed-in sessions live; share it between instances. Nil (the
    ///     default): `accounts`, when it keeps sessions too (the SQLite and PostgreSQL stores
    ///     do); in memory, when `accounts` is an ``InMemoryAccountStore``; otherwise refused
    ///     (`configuration_invalid`): sessions in memory beside durable accounts would sign
    ///     everyone out at every restart and not be shared between instances (an adopter's review).
    ///   - configuration: what the routes serve, and how. Default: the safe defaults
    ///     of ``ServerConfiguration``, with a random secret per process.
    /// - Throws: `configuration_invalid` for a secret outside 32 to 1024 bytes, a session cookie
    ///   name that is not 1 to 64 of `A-Z a-z 0-9 _ -` or starts with `__`, a session lifetime
    ///   outside 60 seconds to 400 days, or no session store
    ///   (above). (They stopped the process; an adopter's review: a secret read short from a vault.)
    public init(
        engine: WebAuthnEngine, accounts: any AccountStore, sessions: (any SessionStore)? = nil,
        configuration: ServerConfiguration = ServerConfiguration()
    ) throws(WebAuthnError) {
        // The key of every session cookie and of the stand-ins: a short one is a configuration
        // error to stop at, not to serve with (an adopter's review: `secret: []` was taken).
        guard (32...1024).contains(configuration.secret.count) else {
            throw WebAuthnError(.configurationInvalid, "ServerConfiguration.secret must be 32 to 1024 bytes, not \(configuration.secret.count)")
        }
        let name = configuration.sessionCookieName.utf8
        guard
            (1...64).contains(name.count) && !name.starts(with: "__".utf8)
                && name.allSatisfy({ b in (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x5F || b == 0x2D })
        else {
            throw WebAuthnError(.configurationInvalid, "ServerConfiguration.sessionCookieName must be 1 to 64 of A-Z a-z 0-9 _ -, not starting with __")
        }
        // The cookie's `Max-Age` is the lifetime in whole seconds: one that is not finite stopped the
        // process when the first cookie was written (red team, thirty-fifth pass; the property is a
        // `var`, so the initialiser's floor of 60 s does not hold for it). Browsers keep a cookie
        // 400 days at most (RFC 6265bis).
        guard (60...Self.maxSessionLifetime).contains(configuration.sessionLifetime) else {  // NaN and infinities are outside
            throw WebAuthnError(
                .configurationInvalid, "ServerConfiguration.sessionLifetime must be 60 s to 400 days, not \(configuration.sessionLifetime)")
        }
        let sessionStore: any SessionStore
        if let sessions {
            sessionStore = sessions
        } else if let kept = accounts as? any SessionStore {
            sessionStore = kept
        } else if accounts is InMemoryAccountStore {
            sessionStore = InMemorySessionStore()
        } else {
            throw WebAuthnError(
                .configurationInvalid, "WebAuthnRoutes needs sessions: a session store beside this account store, which keeps none")
        }
        self.engine = engine
        self.accounts = accounts
        self.configuration = configuration
        self.sessions = BrowserSessions(
            store: sessionStore, secret: configuration.secret, secure: configuration.secureCookies,
            lifetime: configuration.sessionLifetime, name: configuration.sessionCookieName)
        self.standIns = try StandInCredentials(secret: configuration.secret)
        self.limiter = configuration.rateLimit.map { RateLimiter(maxTracked: $0.maxTracked) }
        self.metrics = RouteMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory)
    }

    var now: Date { engine.relyingParty.clock.now() }

    /// The longest ``ServerConfiguration/sessionLifetime``: 400 days, the most a browser keeps a cookie.
    static let maxSessionLifetime: TimeInterval = 400 * 86_400

    /// Mounts ``routes(context:)`` on `router` under `path` (the host app's choice,
    /// "" for the root), the well-known files at the root whatever `path` is (browsers
    /// look for them there only), and ``demoRoutes(context:)`` at the root when
    /// ``ServerConfiguration/demo`` is set. Adds no middleware to `router` itself.
    ///
    /// `Context` must report the client's address (`RemoteAddressRequestContext`, such as
    /// ``WebAuthnRequestContext``): throttling counts per address, and a context without one
    /// would count every client as one, so that one client's flood refused sign-in to all
    /// (an adopter's review).
    public func add<Context: RemoteAddressRequestContext>(to router: Router<Context>, atPath path: String = "") {
        mount(on: router, atPath: path)
    }

    /// ``add(to:atPath:)`` on any router (``buildApplication(engine:accounts:sessions:configuration:)``
    /// mounts through one that records each route).
    func mount<Methods: RouterMethods>(on router: Methods, atPath path: String) where Methods.Context: RemoteAddressRequestContext {
        typealias Context = Methods.Context
        router.addRoutes(routes(context: Context.self), atPath: RouterPath(path))
        if !path.isEmpty && path != "/" {
            let wellKnown = RouteCollection(context: Context.self)
            addWellKnown(to: wellKnown)
            router.addRoutes(wellKnown)
        }
        if configuration.demo { router.addRoutes(demoRoutes(context: Context.self)) }
    }

    /// The FIDO2 server conformance API (`POST /attestation/options`,
    /// `/attestation/result`, `/assertion/options`, `/assertion/result`) and the
    /// configured well-known files, as a collection to mount where the host app
    /// chooses: `router.addRoutes(webauthn.routes(context: C.self), atPath: "/webauthn")`.
    /// The security headers apply to these routes only. The well-known files
    /// (`/.well-known/webauthn`, `/.well-known/apple-app-site-association`) are in the
    /// collection too: mounted under a path, they are not where browsers look, and
    /// ``add(to:atPath:)`` mounts them at the root as well. `Context`: see ``add(to:atPath:)``.
    public func routes<Context: RemoteAddressRequestContext>(context: Context.Type = Context.self) -> RouteCollection<Context> {
        let router = RouteCollection(context: Context.self)
        router.add(middleware: SecurityHeadersMiddleware<Context>(secure: configuration.secureCookies))
        router.post("/attestation/options") { request, context in
            await ceremony(request, context, as: "registration_options", starts: true) { try await attestationOptions(request, context) }
        }
        router.post("/attestation/result") { request, context in
            await ceremony(request, context, as: "registration") { try await attestationResult(request, context) }
        }
        router.post("/assertion/options") { request, context in
            await ceremony(request, context, as: "authentication_options", starts: true) { try await assertionOptions(request, context) }
        }
        router.post("/assertion/result") { request, context in
            await ceremony(request, context, as: "authentication") { try await assertionResult(request, context) }
        }
        if !configuration.conformance { addReauthentication(to: router) }
        addWellKnown(to: router)
        if let apple = configuration.apple { addApple(to: router, apple) }
        return router
    }

    /// The configured well-known files (related origins, Apple's web credentials).
    func addWellKnown<Context: RequestContext>(to router: RouteCollection<Context>) {
        if !configuration.relatedOrigins.isEmpty {
            router.get("/.well-known/webauthn") { _, _ in HTTP.json(["origins": .array(configuration.relatedOrigins.map { .string($0) })]) }
        }
        if !configuration.appleWebCredentialApps.isEmpty {
            router.get("/.well-known/apple-app-site-association") { _, _ in
                HTTP.json(["webcredentials": ["apps": .array(configuration.appleWebCredentialApps.map { .string($0) })]])
            }
        }
    }

    // MARK: Request handling

    /// A ceremony endpoint: JSON only, throttled, every error turned into the
    /// conformance API's failure envelope without internal detail; counted by the code
    /// the client is answered with, and timed.
    func ceremony<Context: RequestContext>(
        _ request: Request, _ context: Context, as name: String, starts: Bool = false, _ body: () async throws -> Response
    ) async -> Response {
        let started = ContinuousClock.now
        var code = "ok"
        let response = await handle(request, context) {
            do {
                try HTTP.requireJSON(request)
                try throttle(request, context, starts: starts)
                return try await body()
            } catch {
                code = Self.answeredCode(error)
                throw error
            }
        }
        metrics.ceremony(name, code: code, duration: ContinuousClock.now - started)
        return response
    }

    /// The code a failure is answered with (see ``failure(_:_:_:)``).
    static func answeredCode(_ error: any Error) -> String {
        switch error {
        case let signalled as SignalledFailure:
            return answeredCode(signalled.error)
        case let error as WebAuthnError:
            switch error.code {
            case .storageFailure, .cryptoFailure, .configurationInvalid: return WebAuthnError.Code.internalError.rawValue
            default: return error.code.rawValue
            }
        case is Throttled: return WebAuthnError.Code.rateLimited.rawValue
        default: return WebAuthnError.Code.internalError.rawValue
        }
    }

    /// Runs a handler, turning every error into the failure envelope: the
    /// code and message of client errors; for internal ones a generic
    /// message and the request id, with the detail in the log.
    func handle<Context: RequestContext>(_ request: Request, _ context: Context, _ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as WebAuthnError {
            return failure(error, request, context)
        } catch let signalled as SignalledFailure {
            var response = failure(signalled.error, request, context)
            response = HTTP.failed(signalled.error, status: response.status, extra: ["signal": signalled.signal])
            return response
        } catch let throttled as Throttled {
            var response = HTTP.failed(WebAuthnError(.rateLimited, "too many requests; retry in \(throttled.seconds) s"), status: .tooManyRequests)
            response.headers[.retryAfter] = String(throttled.seconds)
            metrics.throttled(scope: throttled.scope)
            // One audit event per address in each ten seconds: a refused request costs the
            // client nothing, and a line for each wrote the log as fast as they came.
            if limiter?.take("l:" + throttled.address, rate: Self.throttledEventRate, now: now, burst: 1) == nil {
                audit("throttled", request, context, throttledEvent(throttled, request, context))
            }
            return response
        } catch {
            return failure(WebAuthnError(.storageFailure, "\(error)"), request, context)
        }
    }

    func failure<Context: RequestContext>(_ error: WebAuthnError, _ request: Request, _ context: Context) -> Response {
        let id = context.id
        switch error.code {
        case .storageFailure, .cryptoFailure, .configurationInvalid:
            if error.code == .storageFailure { metrics.storeError() }
            context.logger.error("internal error", metadata: ["code": .string(error.code.rawValue), "detail": .string(error.message)])
            return HTTP.failed(WebAuthnError(.internalError, "the server failed; quote request id \(id)"), status: .internalServerError)
        case .appleEndpointUnavailable, .appleJWKSUnavailable, .appleJWKSInvalid:
            // Apple's fault, not the client's: 502, and the upstream's address, status and transport
            // errors stay in the log (red team: the key endpoint's failures answered 400 with them).
            // One line a second at most (in bursts of 10): during an outage every attempt fails so.
            if let suppressed = auditBudget.admit("apple-upstream", rate: 1, burst: 10, now: now) {
                var metadata: Logger.Metadata = ["code": .string(error.code.rawValue), "detail": .string(error.message)]
                if suppressed > 0 { metadata["suppressed"] = .stringConvertible(suppressed) }
                context.logger.warning("Apple's endpoint failed", metadata: metadata)
            }
            return HTTP.failed(WebAuthnError(error.code, "Sign in with Apple is not answering; try again later (request id \(id))"), status: .badGateway)
        case .tooManyPendingCeremonies:
            context.logger.warning("pending ceremonies at their limit", metadata: ["code": .string(error.code.rawValue)])
            var response = HTTP.failed(error, status: .serviceUnavailable)
            response.headers[.retryAfter] = "30"
            return response
        default:
            return HTTP.failed(error, status: HTTP.status(for: error))
        }
    }

    /// The account the request is signed in as: the host application's hook
    /// first, then the passkey session.
    func signedInAccount(_ request: Request, token: BrowserSessions.Token?) async throws -> [UInt8]? {
        if let hook = configuration.signedInAccount, let handle = await hook(request) { return handle }
        return try await sessions.signedIn(token, now: now)?.userHandle
    }
}

extension WebAuthnRoutes {
    /// Writes an audit event (``Audit``). An event that records a change to an account (it names
    /// the account, and the account's own session or a verified ceremony caused it) is always
    /// written: what causes it is throttled (``throttleChanges(_:_:_:)`` for renames). A refusal or
    /// failure, which a stranger causes at will, is written within its client address's budget of
    /// ``Audit/rate`` a second in bursts of ``Audit/burst``; the rest are counted, and the next one
    /// written for that address says how many were not (`suppressed`). Red team: failed sign-ins
    /// without a cookie wrote 90 lines a second per address; keyed by the account they named,
    /// refusals a stranger caused spent that account's budget and hid its own deletions.
    func audit<Context: RequestContext>(_ name: String, _ request: Request, _ context: Context, _ metadata: Logger.Metadata = [:]) {
        var m = metadata
        if metadata["account"] == nil || Audit.refusals.contains(name) {
            guard let suppressed = auditBudget.admit("p:" + clientAddress(request, context), rate: Audit.rate, burst: Audit.burst, now: now) else {
                return
            }
            // And all addresses together: red team, thirty-second pass: 14,497 lines in 5 s from
            // as many forwarded addresses, each with a budget of its own.
            guard let suppressedAll = auditBudget.admit("p:*", rate: Audit.allRate, burst: Audit.allBurst, now: now) else {
                // The address's own count of lines not written goes to the next line written.
                auditBudget.addRefused("p:*", suppressed)
                return
            }
            if suppressed > 0 { m["suppressed"] = .stringConvertible(suppressed) }
            if suppressedAll > 0 { m["suppressedAll"] = .stringConvertible(suppressedAll) }
        }
        m["event"] = .string(name)
        context.logger.notice("audit", metadata: m)
    }

    /// Counts a change to `account` (a rename) against the account's allowance of
    /// ``Audit/changeRate`` a second in bursts of ``Audit/changeBurst``, whether or not requests are
    /// throttled otherwise: `429 rate_limited` past it. Red team: a signed-in stranger renaming their
    /// own account in a loop made 900 changes, and wrote 900 audit lines, a second.
    func throttleChanges<Context: RequestContext>(_ account: [UInt8], _ request: Request, _ context: Context) throws {
        if let wait = auditBudget.take("c:" + Audit.hash(account), rate: Audit.changeRate, now: now, burst: Audit.changeBurst) {
            throw Throttled(seconds: wait, scope: "changes", address: clientAddress(request, context))
        }
    }

    /// The client's address bucket (``ClientAddress/bucket(_:)``): the socket peer, or behind a
    /// trusted proxy the forwarded address.
    func clientAddress<Context: RequestContext>(_ request: Request, _ context: Context) -> String {
        ClientAddress.bucket(
            ClientAddress.of(
                request, peer: (context as? any RemoteAddressRequestContext)?.remoteAddress, trustedProxies: configuration.trustedProxies))
    }
}

/// The audit trail: one structured log event (level notice) per
/// registration, sign-in, failure and deletion, and one per client address
/// in each ten seconds it is throttled, with the request id and hashes of the
/// account handle and credential id; never a challenge, cookie, key or body.
/// Refusals and failures are written within a budget per client address
/// (``WebAuthnRoutes/audit(_:_:_:_:)``); changes to an account always are.
enum Audit {
    /// Refusal and failure events written per client address, per second.
    static let rate = 5.0
    /// The burst of refusal and failure events one client address may write.
    static let burst = 50.0
    /// Refusal and failure events written per second from all addresses together, and their burst:
    /// a stranger with many addresses (an IPv6 prefix, a forwarded header behind a trusted proxy)
    /// fills the log no faster. The lines not written are counted (`suppressedAll`).
    static let allRate = 50.0, allBurst = 500.0
    /// Events that name an account but record a refusal a stranger can cause (asking to enroll
    /// onto a taken name): budgeted by address like failures, never by the account they name.
    static let refusals: Set<String> = ["enrollment_refused"]
    /// Renames per account per second, and their burst.
    static let changeRate = 1.0, changeBurst = 20.0

    /// The first 12 bytes of SHA-256, in base64url: enough to correlate, not to identify.
    static func hash(_ bytes: [UInt8]) -> String { Base64URL.encode(Array(Digest.sha256(bytes).prefix(12))) }
}

/// A request context that knows the client's socket address (for throttling).
public struct WebAuthnRequestContext: RequestContext, RemoteAddressRequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The socket peer's address (a proxy's, when behind one; see ``ServerConfiguration/trustedProxies``).
    public let remoteAddress: SocketAddress?

    /// The context of a request arriving on `source`'s channel.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// A failure whose answer also carries a Signals API call for the page (``CredentialSignal``).
struct SignalledFailure: Error {
    let error: WebAuthnError
    let signal: JSONValue
}
