import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import SignInWithApple
import WebAuthnCore
import WebAuthnServer
import WebAuthnPostgres
import WebAuthnSQLite
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// `webauthn serve`: the relying party over HTTP (FIDO2 conformance API and demo page).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the FIDO2 conformance API and the demo page until SIGINT or SIGTERM.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0: any free port).") var port = 8080
    @Option(name: .customLong("rp-id"), parsing: .unconditional, help: "The RP ID.") var rpId = "localhost"
    @Option(name: .customLong("rp-name"), parsing: .unconditional, help: "The RP name shown by authenticators.") var rpName: String?
    @Option(name: .customLong("origin"), parsing: .unconditionalSingleValue, help: "An allowed origin (repeatable). Default: http://localhost:PORT.")
    var origins: [String] = []
    @Option(parsing: .unconditional, help: "Storage: sqlite:PATH or postgres://USER@HOST:PORT/DB.")
    var db = "sqlite:./webauthn.sqlite"
    @Option(
        name: .customLong("db-connections"),
        help: "PostgreSQL connections of this process, 1 to 64. Default: one per processor, 2 to 8 (statements queued on a busy connection are pipelined).")
    var dbConnections: Int?
    @OptionGroup var trust: MetadataOptions
    @Flag(name: .customLong("require-trusted-attestation"), help: "Refuse attestation chains that do not lead to a trusted root.")
    var requireTrustedAttestation = false
    @Option(name: .customLong("attestation-types"), parsing: .unconditional, help: "Accepted attestation types: a subset of none,self,basic,attca,anonca.")
    var attestationTypes: String?
    @Option(
        parsing: .unconditional,
        help:
            "Algorithms offered in pubKeyCredParams, in preference order: comma-separated COSE names. Default ES256,EdDSA,ES384,ES512,PS256,RS256; also Ed25519, Ed448, ESP256, ESP384, ESP512, ES256K, PS384, PS512, RS384, RS512."
    )
    var algorithms: String?
    @Flag(name: .customLong("require-user-verification"), help: "Require the UV flag in every ceremony.") var requireUserVerification = false
    @Flag(name: .customLong("allow-cross-origin"), help: "Accept cross-origin ceremonies from any top-level origin.") var allowCrossOrigin = false
    @Option(
        name: .customLong("top-origin"), parsing: .unconditionalSingleValue, help: "Accept cross-origin ceremonies from this top-level origin (repeatable).")
    var topOrigins: [String] = []
    @Option(name: .customLong("challenge-ttl"), help: "Seconds a challenge stays valid.") var challengeTTL: Double = 300
    @Option(name: .customLong("related-origin"), parsing: .unconditionalSingleValue, help: "An origin for /.well-known/webauthn (repeatable).")
    var relatedOrigins: [String] = []
    @Option(
        name: .customLong("apple-app-id"), parsing: .unconditionalSingleValue,
        help: "An app ID for /.well-known/apple-app-site-association webcredentials (repeatable).")
    var appleAppIDs: [String] = []
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.") var logLevel = "info"
    @Option(
        name: .customLong("log-rate"),
        help:
            "Log lines below notice (the request log) written per second at most, in bursts of ten seconds' worth; the rest are counted and not written. Notices and above (the audit trail) are always written. 0: no limit."
    )
    var logRate = 200
    @Option(name: .customLong("idle-timeout"), help: "Seconds before an idle connection is closed.") var idleTimeout: Int64 = 30
    @Option(
        name: .customLong("request-timeout"),
        help:
            "Seconds a request's body may take to arrive after its head, and answers may wait for a client that reads none; the connection is then closed."
    )
    var requestTimeout: Int64 = 10
    @Option(
        name: .customLong("max-connections-per-address"),
        help:
            "The most connections one client address (IPv6: its /64) may hold open; more are closed when accepted. Trusted proxies are exempt. 0: no limit."
    )
    var maxConnectionsPerAddress = 256
    @Option(
        name: .customLong("max-connections"),
        help:
            "The most connections open at once, from all addresses; more wait in the listen queue. 0: no limit. Default: the descriptor limit (raised to its hard limit at start) less 256."
    )
    var maxConnections: Int?
    @Option(
        name: .customLong("allocator-trim-interval"),
        help:
            "Seconds between returns of the memory the C allocator keeps free (malloc_trim) to the system, so that RSS falls back after a burst of large requests. 0: never."
    )
    var allocatorTrimInterval = 30
    @Option(
        name: .customLong("secret-file"),
        help: ArgumentHelp(
            "A file holding the server secret (at least 32 bytes; or the WEBAUTHN_SECRET environment variable): it signs session cookies and derives the stand-ins of unknown names. Default: one generated once and kept in the database."
        ))
    var secretFile: String?
    @Option(
        name: .customLong("rate-limit"),
        help:
            "Throttle the ceremony endpoints: off, or A[:S]: A requests per second per client address without a session, S per session; bursts of ten seconds' worth."
    )
    var rateLimit = "30:300"
    @Option(
        name: .customLong("trusted-proxy"), parsing: .unconditionalSingleValue,
        help: "A proxy range (CIDR) whose X-Forwarded-For is believed for the client address (repeatable).")
    var trustedProxies: [String] = []
    @Flag(
        name: .customLong("conformance"),
        help: "The FIDO conformance tools' semantics: anyone may enroll onto an existing name, and unknown names fail. Unsafe: for conformance runs only.")
    var conformance = false
    @Flag(name: .customLong("no-demo"), help: "Do not serve the demo page (/) and its API (/demo/).") var noDemo = false
    @Option(
        name: .customLong("passkey-providers"), parsing: .unconditional,
        help: ArgumentHelp(
            "The community passkey-provider list (AAGUID to name and icon, for naming credentials): a file, or its URL (https://raw.githubusercontent.com/passkeydeveloper/passkey-authenticator-aaguids/main/aaguid.json), fetched at start and daily. Default: none (FIDO metadata, then \"Passkey\" / \"Security key\")."
        ))
    var passkeyProviders: String?
    @Option(
        name: .customLong("passkey-providers-cache"), parsing: .unconditional,
        help: "With a --passkey-providers URL: a file that keeps the last list fetched, for starts without network.")
    var passkeyProvidersCache: String?
    @Option(
        name: .customLong("reauthentication-window"),
        help:
            "Seconds within which the account must have verified the user (a UV passkey assertion, Sign in with Apple) to delete a credential or the account, or add a passkey. At least 30."
    )
    var reauthenticationWindow: Double = 300
    @Option(
        name: .customLong("max-credentials-per-account"),
        help: "The most credentials (passkeys and security keys) one account may hold; registering another is refused until one is deleted.")
    var maxCredentialsPerAccount = 32
    @Option(
        name: .customLong("u2f-appid"), parsing: .unconditional,
        help: "The AppID of a former U2F deployment whose credentials may still sign in (the appid extension). Default: none.")
    var u2fAppID: String?
    @Option(
        name: .customLong("apple-client-id"), parsing: .unconditionalSingleValue, help: "Sign in with Apple: an app's bundle ID (native sign-in; repeatable).")
    var appleClientIDs: [String] = []
    @Option(name: .customLong("apple-services-id"), parsing: .unconditional, help: "Sign in with Apple: the Services ID the web flow uses as client_id.")
    var appleServicesID: String?
    @Option(name: .customLong("apple-team-id"), parsing: .unconditional, help: "Sign in with Apple: the team ID (client secrets).") var appleTeamID: String?
    @Option(name: .customLong("apple-key-id"), parsing: .unconditional, help: "Sign in with Apple: the key ID of the .p8 key.") var appleKeyID: String?
    @Option(name: .customLong("apple-private-key"), parsing: .unconditional, help: "Sign in with Apple: the .p8 private key file.") var applePrivateKey: String?
    @Option(
        name: .customLong("apple-redirect-uri"), parsing: .unconditional,
        help: "Sign in with Apple: the web flow's redirect URI (reaching POST /apple/web/callback).")
    var appleRedirectURI: String?
    @Option(name: .customLong("apple-base-url"), parsing: .unconditional, help: "Sign in with Apple: Apple's base URL (default https://appleid.apple.com).")
    var appleBaseURL: String?
    @Option(
        name: .customLong("mds-url"), parsing: .unconditional,
        help: "Fetch the FIDO MDS3 BLOB from this URL on schedule, verified and swapped in without a restart (FIDO's: https://mds3.fidoalliance.org/).")
    var mdsURL: String?
    @Option(
        name: .customLong("mds-root"), parsing: .unconditional,
        help: "A PEM root for the fetched BLOB's signing chain (default: --metadata-root, else the FIDO MDS root).")
    var mdsRoot: String?
    @Option(
        name: .customLong("mds-cache"), parsing: .unconditional,
        help: "A folder for the last good fetched BLOB: written atomically, verified again at start (a restart without network starts from it).")
    var mdsCache: String?
    @Option(
        name: .customLong("metrics"), help: "Who may read GET /metrics: off, loopback (default: loopback clients that came through no proxy) or anyone.")
    var metrics = "loopback"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard challengeTTL > 0 else { throw ValidationError("--challenge-ttl must be positive") }
        guard idleTimeout > 0 else { throw ValidationError("--idle-timeout must be positive") }
        guard (1...3600).contains(requestTimeout) else { throw ValidationError("--request-timeout must be 1...3600") }
        guard (0...1_000_000).contains(maxConnectionsPerAddress) else { throw ValidationError("--max-connections-per-address must be 0...1000000") }
        if let maxConnections, !(0...10_000_000).contains(maxConnections) { throw ValidationError("--max-connections must be 0...10000000") }
        guard (0...86_400).contains(allocatorTrimInterval) else { throw ValidationError("--allocator-trim-interval must be 0...86400") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level \(logLevel)") }
        guard (0...1_000_000).contains(logRate) else { throw ValidationError("--log-rate must be 0...1000000") }
        guard isPostgres || (db.hasPrefix("sqlite:") && db.count > "sqlite:".count) else {
            throw ValidationError("--db must be sqlite:PATH or postgres://USER@HOST:PORT/DB")
        }
        if let dbConnections {
            guard isPostgres else { throw ValidationError("--db-connections is for a postgres:// database") }
            guard (1...64).contains(dbConnections) else { throw ValidationError("--db-connections must be 1...64") }
        }
        guard (1...1000).contains(maxCredentialsPerAccount) else { throw ValidationError("--max-credentials-per-account must be 1...1000") }
        guard RateLimit.parse(rateLimit) != nil else { throw ValidationError("--rate-limit must be off, A or A:S with positive numbers") }
        for proxy in trustedProxies where CIDR(proxy) == nil { throw ValidationError("--trusted-proxy \(proxy) is not an address range such as 10.0.0.0/8") }
        _ = try secret()
        _ = try appleConfiguration()
        guard MetricsExposure(rawValue: metrics) != nil else { throw ValidationError("--metrics must be off, loopback or anyone") }
        guard mdsURL != nil || (mdsRoot == nil && mdsCache == nil) else { throw ValidationError("--mds-root and --mds-cache need --mds-url") }
        if let mdsURL {
            guard let url = URL(string: mdsURL), url.scheme == "https" || (url.scheme == "http" && ["127.0.0.1", "localhost", "::1"].contains(url.host ?? ""))
            else { throw ValidationError("--mds-url must be an https URL (or http on loopback, for a stand-in)") }
        }
        _ = try fetchProxy()
    }

    var isPostgres: Bool { db.hasPrefix("postgres://") || db.hasPrefix("postgresql://") }

    func run() async throws {
        let budget = logRate > 0 ? LogBudget(rate: Double(logRate)) : nil
        var logger = Logger(label: "webauthn") { ServerLogHandler(label: $0, budget: budget) }
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let descriptors = Self.raiseDescriptorLimit()
        let types = try VerifyRegistration.parseTypes(attestationTypes)
        let crossOrigin: CrossOriginPolicy = !topOrigins.isEmpty ? .allowTopOrigins(topOrigins) : allowCrossOrigin ? .allowAnyTopOrigin : .deny
        let policy = VerificationPolicy(
            userVerification: requireUserVerification ? .required : .preferred, crossOrigin: crossOrigin,
            algorithms: try Self.parseAlgorithms(algorithms) ?? VerificationPolicy().algorithms,
            attestation: AttestationPolicy(acceptedTypes: types, requireTrustedAttestation: requireTrustedAttestation), u2fAppID: u2fAppID)
        let store: any CredentialAuditing & ChallengeStore & AccountStore & LinkedIdentityStore & SessionStore & Service
        let sqlite: SQLiteStore?
        if isPostgres {
            store = try await PostgresStore.open(url: db, connections: dbConnections ?? PostgresStore.defaultConnections)
            sqlite = nil
        } else {
            let opened = try await SQLiteStore.open(path: String(db.dropFirst("sqlite:".count)), logger: logger)
            sqlite = opened
            store = opened
        }
        warnAboutReadableSecrets(logger)
        let (anchors, staticSerial) = try trust.anchorsAndSerial(at: Date()) { path, error in
            logger.error(
                "metadata BLOB rejected, not used", metadata: ["file": .string(path), "code": .string(error.code.rawValue), "reason": .string(error.message)])
        }
        // The passkey-provider list: a file read now, or a URL fetched at start and daily (a
        // cache file serves starts without network).
        let providers = PasskeyProviderDirectory()
        var providerService: PasskeyProviderService?
        if let passkeyProviders {
            if let url = URL(string: passkeyProviders), url.scheme == "https" || url.scheme == "http" {
                if let cache = passkeyProvidersCache, FileManager.default.fileExists(atPath: cache) {
                    do { providers.install(try PasskeyProviderList.load(path: cache)) } catch {
                        logger.warning("the cached passkey-provider list is unreadable", metadata: ["file": .string(cache), "reason": .string(error.message)])
                    }
                }
                var providerLogger = logger
                providerLogger[metadataKey: "component"] = "providers"
                providerService = PasskeyProviderService(directory: providers, url: url, cache: passkeyProvidersCache, logger: providerLogger)
            } else {
                do {
                    providers.install(try PasskeyProviderList.load(path: passkeyProviders))
                } catch {
                    throw ValidationError("--passkey-providers \(passkeyProviders): \(error.message)")
                }
                let list = providers.list
                if list.isEmpty {
                    // The list's maintainers retire it by emptying it: say so rather than silently show nothing.
                    logger.warning("the passkey-provider list names no provider (retired, or not the list?)", metadata: ["file": .string(passkeyProviders)])
                } else {
                    logger.info(
                        "passkey-provider list loaded",
                        metadata: ["providers": .stringConvertible(list.providers.count), "skipped": .stringConvertible(list.skipped)])
                }
            }
        }
        if let proxy = try fetchProxy() {
            logger.info("https fetches go through a proxy (HTTPS_PROXY)", metadata: ["proxy": .string(proxy.description), "direct": "\(proxy.bypass)"])
        }
        let allowed = origins.isEmpty ? ["http://localhost:\(port)"] : origins
        let rp: RelyingParty
        do {
            rp = try RelyingParty(id: rpId, name: rpName, origins: allowed, policy: policy, challengeLifetime: challengeTTL, trustAnchors: anchors)
        } catch {
            throw ValidationError(error.message)
        }
        let engine = WebAuthnEngine(
            relyingParty: rp, credentials: store, challenges: store, accounts: store,
            limits: WebAuthnEngine.Limits(maxCredentialsPerUser: maxCredentialsPerAccount))
        // Stored credentials are re-audited after each metadata change (in the background, one
        // audit at a time), and once at start against the metadata loaded from files.
        var auditLogger = logger
        auditLogger[metadataKey: "component"] = "audit"
        let auditor = CredentialAuditor(store: store, engine: engine, logger: auditLogger)
        let metadata = try metadataService(engine: engine, staticSerial: staticSerial, logger: logger, onInstall: { _ in auditor.requestAudit() })
        if !engine.trustAnchors.metadata.isEmpty { auditor.requestAudit() }
        var secret = try self.secret()
        if secret == nil {
            // Kept with the data: stable across restarts, shared by instances on one database.
            if let sqlite {
                secret = try await sqlite.serverSecret()
            } else if let postgres = store as? PostgresStore {
                secret = try await postgres.serverSecret()
            }
            logger.notice("no --secret-file or WEBAUTHN_SECRET: the server secret is the one kept in the database")
        }
        if conformance {
            logger.warning("--conformance: anyone may enroll a credential onto an existing name and unknown names are revealed; never use it for real accounts")
        }
        if allowed.contains(where: { $0.hasPrefix("https://") }) && !allowed.allSatisfy({ $0.hasPrefix("https://") }) {
            logger.warning(
                "an http:// origin beside https:// ones: session cookies are not Secure (no __Host- prefix, no HSTS) for any origin; serve the http:// ones from a server of their own"
            )
        }
        let listenPort = port
        // The store line names the database, never its credentials.
        let (host, db) = (self.host, isPostgres ? "postgres (" + (URLComponents(string: self.db)?.host ?? "?") + ")" : self.db)
        let routes = ServerConfiguration(
            relatedOrigins: relatedOrigins, appleWebCredentialApps: appleAppIDs, secureCookies: allowed.allSatisfy { $0.hasPrefix("https://") },
            demo: !noDemo, secret: secret, conformance: conformance, rateLimit: RateLimit.parse(rateLimit) ?? RateLimit(),
            trustedProxies: trustedProxies.compactMap(CIDR.init),
            apple: try appleConfiguration().map { apple in
                AppleConfiguration(
                    signIn: AppleSignIn(configuration: apple, clock: rp.clock), identities: store,
                    servicesID: appleServicesID, redirectURI: appleRedirectURI)
            }, reauthenticationWindow: reauthenticationWindow, passkeyProviders: providers)
        var application = ApplicationConfiguration(
            host: host, port: listenPort, idleTimeout: .seconds(idleTimeout),
            routes: routes,
            logger: logger,
            onServerRunning: { bound in
                let line = "webauthn: listening on http://\(host):\(bound) for RP ID \(rp.id) (origins \(rp.origins.joined(separator: " "))), store \(db)\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            }, metadata: metadata, metrics: MetricsExposure(rawValue: metrics) ?? .loopback)
        application.requestTimeout = .seconds(requestTimeout)
        application.maxConnectionsPerAddress = maxConnectionsPerAddress == 0 ? nil : maxConnectionsPerAddress
        // The default, read after the limit was raised, is that limit less the reserve.
        if let maxConnections { application.maxConnections = maxConnections == 0 ? nil : maxConnections }
        if let cap = application.maxConnections, let perAddress = application.maxConnectionsPerAddress, cap <= perAddress {
            // Red team, thirty-sixth pass: then one address can hold every connection, for as long as it sends.
            logger.warning(
                "--max-connections (\(cap)) is not above --max-connections-per-address (\(perAddress)): one address can hold every connection")
        }
        logger.info(
            "connections", metadata: ["descriptors": "\(descriptors)", "max_connections": "\(application.maxConnections.map(String.init) ?? "unlimited")"])
        let app = try buildApplication(engine: engine, accounts: store, sessions: store, configuration: application)
        // The store first: a group shuts its services down in reverse order, so the HTTP server
        // drains before the store closes (and the metadata service stops before either).
        var services: [any Service] = [store, app] + (metadata.map { [$0] } ?? []) + (providerService.map { [$0] } ?? [])
        if allocatorTrimInterval > 0 { services.append(AllocatorTrim(interval: .seconds(allocatorTrimInterval), logger: logger)) }
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// Raises the soft limit on open files to the hard one (a server's connections are files; a
    /// default soft limit of 1,024 let four addresses take them all); returns the soft limit now.
    static func raiseDescriptorLimit() -> String {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return "unknown" }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur == rlim_t.max ? "unlimited" : String(limit.rlim_cur)
    }
}
