internal import Foundation
public import Hummingbird
internal import HummingbirdCore
public import Logging
public import WebAuthnCore
public import WebAuthnMetadata

/// How ``buildApplication(engine:accounts:sessions:configuration:)`` serves.
public struct ApplicationConfiguration: Sendable {
    /// The address and port to listen on (port 0: any free port).
    public var host: String
    /// The port to listen on; 0 picks any free port (passed to ``onServerRunning``). Default 8080.
    public var port: Int
    /// Seconds before an idle connection is closed.
    public var idleTimeout: Duration
    /// How long a request may take to arrive, from its head (once parsed) to the end of its body; a
    /// connection whose request is still arriving then is closed without an answer. The idle
    /// timeout alone lets a client that trickles a byte every few seconds hold a connection for
    /// ever. Also how long answers may wait for a client that reads none of them (the connection
    /// unwritable) before it is closed. Default 10 seconds (a 64 KiB body at 6.4 KB/s).
    public var requestTimeout: Duration = .seconds(10)
    /// The most connections one client address may hold open at once (IPv6 addresses by their
    /// /64); a connection beyond it is closed as soon as it is accepted. The ``ServerConfiguration/trustedProxies``
    /// are exempt (a proxy carries many clients' connections). Browsers open at most six per
    /// server; the room above that is for clients behind one NAT address. Nil: no limit.
    /// Default 256.
    public var maxConnectionsPerAddress: Int? = 256
    /// The most connections open at once, from every address together. At the limit the server
    /// accepts no more (they wait in the listen queue) until one closes, so its file descriptors
    /// never run out: out of descriptors, SwiftNIO's accept loop spun on `EMFILE` and every new
    /// client, `/healthz` included, timed out (red team, thirty-sixth pass). Nil: no limit. Default:
    /// the process's descriptor limit (`RLIMIT_NOFILE`, soft) less ``reservedDescriptors``.
    public var maxConnections: Int? = ApplicationConfiguration.connectionBudget()
    /// The routes' configuration (secret, throttling, proxies, demo, ...).
    public var routes: ServerConfiguration
    /// Where the ceremony routes are mounted ("" for the root, as the FIDO conformance tools expect).
    public var path: String
    /// The application's logger: request log lines and audit events. Default label `webauthn`.
    public var logger: Logger
    /// Called once the server listens, with the port it is bound to.
    public var onServerRunning: @Sendable (Int) async -> Void
    /// The metadata service keeping the engine's FIDO metadata current, if any: `/readyz` waits
    /// for its first verified BLOB, and `/metrics` reports its state. Run it in the same
    /// `ServiceGroup`. Default nil.
    public var metadata: MetadataService?
    /// Who may read `GET /metrics`. Default ``MetricsExposure/loopback``.
    public var metrics: MetricsExposure

    /// The descriptors the default ``maxConnections`` leaves for the rest of the process: the
    /// store's files and connections, outgoing HTTPS (metadata, Apple), the event loops' own.
    public static let reservedDescriptors = 256

    /// The default ``maxConnections``: the soft `RLIMIT_NOFILE` less ``reservedDescriptors``, at least 16.
    static func connectionBudget() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return 1_000_000 }
        return max(16, Int(clamping: limit.rlim_cur) - reservedDescriptors)
    }

    /// A configuration; each parameter sets the property of the same name.
    /// Defaults: `127.0.0.1:8080`, a 30-second idle timeout, the default
    /// ``ServerConfiguration``, routes at the root.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, idleTimeout: Duration = .seconds(30),
        routes: ServerConfiguration = ServerConfiguration(), path: String = "",
        logger: Logger = Logger(label: "webauthn"), onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        metadata: MetadataService? = nil, metrics: MetricsExposure = .loopback
    ) {
        self.metadata = metadata
        self.metrics = metrics
        self.host = host
        self.port = port
        self.idleTimeout = idleTimeout
        self.routes = routes
        self.path = path
        self.logger = logger
        self.onServerRunning = onServerRunning
    }
}

/// The relying-party server that `webauthn serve` runs: one request log line per
/// request (Hummingbird's `LogRequestsMiddleware`; never bodies or headers), the
/// security headers on every answer (404s included), the ceremony routes under
/// `configuration.path`, and the demo when `configuration.routes.demo` is set;
/// `GET /healthz` (the process answers), `GET /readyz` (the store answers and the
/// metadata service, if any, has installed a verified BLOB; 503 until then) and
/// `GET /metrics` (Prometheus text; ``ApplicationConfiguration/metrics`` says to whom),
/// at the root. Run it with `try await app.runService()`, or add it to a `ServiceGroup`
/// with the stores and the metadata service. Throws `configuration_invalid` as
/// ``WebAuthnRoutes/init(engine:accounts:sessions:configuration:)`` does.
public func buildApplication(
    engine: WebAuthnEngine, accounts: any AccountStore, sessions: any SessionStore,
    configuration: ApplicationConfiguration
) throws(WebAuthnError) -> some ApplicationProtocol {
    let export = configuration.metrics == .off ? nil : PrometheusExport()
    var routesConfiguration = configuration.routes
    if let export { routesConfiguration.metricsFactory = export.factory }
    let routes = try WebAuthnRoutes(engine: engine, accounts: accounts, sessions: sessions, configuration: routesConfiguration)
    // HEAD is answered wherever GET is, without the body (RFC 9110 §9.3.2: a general-purpose
    // server supports both; it was 404 everywhere: red team, sixteenth pass).
    let router = Router(context: WebAuthnRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: LogRequestsMiddleware(.info))
    let table = RouteTable(concealing: ["/metrics"])
    router.add(middleware: SecurityHeadersMiddleware(secure: configuration.routes.secureCookies, outer: true, routes: table))
    router.add(middleware: CanonicalPathMiddleware())
    let recording = RecordingRouter(router: router, table: table)
    routes.mount(on: recording, atPath: configuration.path)
    OperationsRoutes(engine: engine, metadata: configuration.metadata, exposure: configuration.metrics, export: export).add(to: recording)
    let port = configuration.port
    let deadline = configuration.requestTimeout
    let maxBody = configuration.routes.maxBodySize
    let secure = configuration.routes.secureCookies
    let connections = configuration.maxConnectionsPerAddress.map {
        ConnectionCounts(limit: max(1, $0), exempt: configuration.routes.trustedProxies)
    }
    let callback = configuration.onServerRunning
    return Application(
        router: router,
        server: .http1(
            configuration: .init(
                additionalChannelHandlers: (connections.map { [ConnectionLimitHandler(counts: $0)] } ?? []) + [
                    RequestDeadlineHandler(deadline: deadline), ConnectionFlowHandler(stallTimeout: deadline, maxBodySize: maxBody, secure: secure),
                ],
                idleTimeout: .seconds(configuration.idleTimeout.components.seconds))),
        configuration: .init(
            address: .hostname(configuration.host, port: port), serverName: "webauthn",
            availableConnectionsDelegate: configuration.maxConnections.map { MaximumAvailableConnections(max(1, $0)) }),
        onServerRunning: { channel in await callback(channel.localAddress?.port ?? port) },
        logger: configuration.logger)
}
